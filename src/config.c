/* config.c — in progress */
