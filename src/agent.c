/* agent.c — in progress */
