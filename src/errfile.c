/* errfile.c — in progress */
