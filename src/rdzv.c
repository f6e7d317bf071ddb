/* rdzv.c — in progress */
