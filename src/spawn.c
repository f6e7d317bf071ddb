/* spawn.c — in progress */
