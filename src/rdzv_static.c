/* rdzv_static.c — in progress */
