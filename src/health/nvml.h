/* nvml.h — NVIDIA's NVML, loaded at run time with dlopen (no build
 * dependency): how much memory each GPU holds, and which processes use it,
 * so that a new attempt starts only once the last one's memory is released
 * (--gpu-memory-wait). NVML calls block (nvmlInit can take seconds): the
 * agent calls these in a child process only (agent_health.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The default library, as the driver installs it. */
#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

/* Most GPUs and processes per GPU looked at. */
#define NVML_MAX_GPUS 64
#define NVML_MAX_PROCS 256

struct nvml;

/* One GPU's use, as nvml_read fills it. */
struct nvml_gpu {
	uint64_t used_bytes; /* nvmlDeviceGetMemoryInfo's used */
	pid_t pids[NVML_MAX_PROCS];
	size_t n_pids; /* compute processes (0 when the library cannot list them) */
};

/* dlopen path (NULL: NVML_DEFAULT_LIBRARY), find the functions used and
 * nvmlInit_v2. Returns 0 with *ret (nvml_close), -ENOENT when the library
 * cannot be loaded (absent), -ENOSYS when it lacks a function, -EIO when
 * nvmlInit fails; *reterr (malloc'd) says why. */
int nvml_open(const char *path, struct nvml **ret, char **reterr);

/* Read every GPU's use into gpus[0..max); returns the number of GPUs, or
 * -EIO with *reterr (malloc'd). */
int nvml_read(struct nvml *n, struct nvml_gpu *gpus, size_t max, char **reterr);

/* nvmlShutdown, dlclose; accepts NULL. */
void nvml_close(struct nvml *n);

/* Whether gpus[0..n) are free for a new attempt: each uses less than
 * threshold_bytes, and none runs a process of watch[0..n_watch) (the last
 * attempt's pids). *ret_busy: the index of the first busy GPU (-1 when
 * free). Pure. */
bool nvml_released(const struct nvml_gpu *gpus, size_t n, uint64_t threshold_bytes,
		   const pid_t *watch, size_t n_watch, int *ret_busy);

/* The wait itself, for a child process: poll every interval_s until
 * nvml_released or deadline_s seconds have passed, writing one line on out_fd
 * about what it saw. Returns 0 (released), 1 (still held at the deadline), 2
 * (NVML absent or unusable: nothing to wait for). */
int nvml_wait_released(const char *path, uint64_t threshold_bytes, const pid_t *watch,
		       size_t n_watch, double deadline_s, double interval_s, int out_fd);
