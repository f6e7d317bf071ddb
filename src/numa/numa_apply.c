/* numa_apply.c — apply a planned binding in the worker's child, between
 * fork and exec: two system calls on masks computed before the fork. */
#include "numa.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

int
numa_apply(const struct numa_binding *b)
{
	int e;

	if (b->mem_mask && syscall(SYS_set_mempolicy, MPOL_BIND, b->mem_mask, b->mem_maxnode) < 0) {
		return -errno;
	}
	if (b->cpu_mask && sched_setaffinity(0, b->cpu_mask_size, b->cpu_mask) < 0) {
		e = errno;
		if (b->mem_mask) {
			/* All or nothing: unbound means the memory too. */
			(void)syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0);
		}
		return -e;
	}
	return 0;
}
