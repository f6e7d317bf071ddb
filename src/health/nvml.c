/* nvml.c — NVML through dlopen (nvml.h). Only the handful of functions used
 * are looked up; their prototypes are NVML's (nvml.h of CUDA 12). */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

typedef int nvml_return;
typedef void *nvml_device;

/* nvmlMemory_t */
struct nvml_memory {
	unsigned long long total, free, used;
};

/* nvmlProcessInfo_t of the _v3 call (v2 layout) */
struct nvml_process_info {
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7

struct nvml {
	void *lib;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*count)(unsigned int *);
	nvml_return (*handle)(unsigned int, nvml_device *);
	nvml_return (*memory)(nvml_device, struct nvml_memory *);
	/* optional: without it the processes are not looked at */
	nvml_return (*procs)(nvml_device, unsigned int *, struct nvml_process_info *);
	const char *(*error_string)(nvml_return);
};

static const char *
nvml_error(const struct nvml *n, nvml_return r)
{
	const char *s = n->error_string ? n->error_string(r) : NULL;

	return s ? s : "NVML error";
}

int
nvml_open(const char *path, struct nvml **ret, char **reterr)
{
	struct nvml *n;
	nvml_return r;

	path = path && *path ? path : NVML_DEFAULT_LIBRARY;
	n = xcalloc(1, sizeof(*n));
	n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		*reterr = xasprintf("cannot load %s: %s", path, dlerror());
		free(n);
		return -ENOENT;
	}
	*(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
	*(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
	*(void **)&n->count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
	*(void **)&n->handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&n->memory = dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
	*(void **)&n->procs = dlsym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	*(void **)&n->error_string = dlsym(n->lib, "nvmlErrorString");
	if (!n->init || !n->shutdown || !n->count || !n->handle || !n->memory) {
		*reterr = xasprintf("%s lacks the NVML functions used", path);
		dlclose(n->lib);
		free(n);
		return -ENOSYS;
	}
	r = n->init();
	if (r != NVML_SUCCESS) {
		*reterr = xasprintf("nvmlInit: %s", nvml_error(n, r));
		dlclose(n->lib);
		free(n);
		return -EIO;
	}
	*ret = n;
	return 0;
}

/* The compute processes of device d into g. */
static void
nvml_read_procs(struct nvml *n, nvml_device d, struct nvml_gpu *g)
{
	struct nvml_process_info info[NVML_MAX_PROCS];
	unsigned int count = NVML_MAX_PROCS;

	g->n_pids = 0;
	if (!n->procs || n->procs(d, &count, info) != NVML_SUCCESS) {
		return;
	}
	for (unsigned int i = 0; i < count && i < NVML_MAX_PROCS; i++) {
		g->pids[g->n_pids++] = (pid_t)info[i].pid;
	}
}

int
nvml_read(struct nvml *n, struct nvml_gpu *gpus, size_t max, char **reterr)
{
	unsigned int count = 0;
	nvml_return r = n->count(&count);

	if (r != NVML_SUCCESS) {
		*reterr = xasprintf("nvmlDeviceGetCount: %s", nvml_error(n, r));
		return -EIO;
	}
	for (unsigned int i = 0; i < count && i < max; i++) {
		nvml_device d = NULL;
		struct nvml_memory m = {0};

		r = n->handle(i, &d);
		if (r == NVML_SUCCESS) {
			r = n->memory(d, &m);
		}
		if (r != NVML_SUCCESS) {
			*reterr = xasprintf("GPU %u: %s", i, nvml_error(n, r));
			return -EIO;
		}
		gpus[i].used_bytes = m.used;
		nvml_read_procs(n, d, &gpus[i]);
	}
	return (int)(count < max ? count : max);
}

void
nvml_close(struct nvml *n)
{
	if (!n) {
		return;
	}
	n->shutdown();
	dlclose(n->lib);
	free(n);
}

bool
nvml_released(const struct nvml_gpu *gpus, size_t n, uint64_t threshold_bytes, const pid_t *watch,
	      size_t n_watch, int *ret_busy)
{
	for (size_t i = 0; i < n; i++) {
		bool busy = gpus[i].used_bytes >= threshold_bytes;

		for (size_t p = 0; !busy && p < gpus[i].n_pids; p++) {
			for (size_t w = 0; w < n_watch; w++) {
				busy |= gpus[i].pids[p] == watch[w];
			}
		}
		if (busy) {
			*ret_busy = (int)i;
			return false;
		}
	}
	*ret_busy = -1;
	return true;
}

/* Write a line to fd. */
static void __attribute__((format(printf, 2, 3))) say(int fd, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	(void)!write_all(fd, s, strlen(s));
	free(s);
}

int
nvml_wait_released(const char *path, uint64_t threshold_bytes, const pid_t *watch, size_t n_watch,
		   double deadline_s, double interval_s, int out_fd)
{
	static struct nvml_gpu gpus[NVML_MAX_GPUS];
	uint64_t start = now_usec(), end = start + (uint64_t)(deadline_s * 1e6);
	struct nvml *n = NULL;
	char *err = NULL;
	int count, busy = -1;

	if (nvml_open(path, &n, &err) < 0) {
		say(out_fd, "%s\n", err);
		free(err);
		return 2;
	}
	for (;;) {
		struct timespec ts = {(time_t)interval_s,
				      (long)((interval_s - (double)(time_t)interval_s) * 1e9)};

		count = nvml_read(n, gpus, NVML_MAX_GPUS, &err);
		if (count < 0) {
			say(out_fd, "%s\n", err);
			free(err);
			nvml_close(n);
			return 2;
		}
		if (nvml_released(gpus, (size_t)count, threshold_bytes, watch, n_watch, &busy)) {
			say(out_fd, "%d GPU%s released after %.1f s\n", count,
			    count == 1 ? "" : "s", (double)(now_usec() - start) / 1e6);
			nvml_close(n);
			return 0;
		}
		if (now_usec() >= end) {
			break;
		}
		nanosleep(&ts, NULL);
	}
	say(out_fd, "GPU %d still holds %llu MiB (%zu process%s) after %.1f s\n", busy,
	    (unsigned long long)(gpus[busy].used_bytes >> 20), gpus[busy].n_pids,
	    gpus[busy].n_pids == 1 ? "" : "es", (double)(now_usec() - start) / 1e6);
	nvml_close(n);
	return 1;
}
