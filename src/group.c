/* group.c — in progress */
