/* worker.c — in progress */
