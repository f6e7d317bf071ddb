/* wenv.c — in progress */
