/* output.c — in progress */
