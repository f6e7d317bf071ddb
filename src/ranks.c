/* ranks.c — in progress */
