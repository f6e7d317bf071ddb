/* sentinel.c — in progress */
