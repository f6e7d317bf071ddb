/* fake_nvml.c — a stand-in for NVIDIA's libnvidia-ml.so.1 with only the
 * functions elasticd's nvml.c uses, for the --gpu-memory-wait tests: the GPUs
 * and their used memory come from a file the test rewrites.
 *
 *   FAKE_NVML_USED   a file "MIB[,MIB...]": one GPU per number, its used
 *                    memory in MiB (unset or unreadable: one GPU, 0 used)
 *   FAKE_NVML_PIDS   a file "PID[,PID...]": GPU 0's compute processes
 *   FAKE_NVML_CALLS  a file each nvmlDeviceGetMemoryInfo call appends a line to
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prototypes are NVML's; -Wmissing-prototypes wants them declared. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetMemoryInfo(void *device, void *memory);
int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, void *infos);
const char *nvmlErrorString(int r);

struct memory {
	unsigned long long total, free, used;
};

struct process_info {
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

#define MAX 16

/* The numbers of the file named by env var, up to MAX; returns how many. */
static unsigned int
numbers(const char *var, unsigned long long *v)
{
	const char *path = getenv(var);
	char buf[512] = "";
	unsigned int n = 0;
	char *p = buf, *end;
	FILE *f;

	if (!path || !(f = fopen(path, "r"))) {
		return 0;
	}
	if (!fgets(buf, sizeof(buf), f)) {
		buf[0] = '\0';
	}
	fclose(f);
	while (n < MAX) {
		unsigned long long x = strtoull(p, &end, 10);

		if (end == p) {
			break;
		}
		v[n++] = x;
		p = end + (*end == ',');
	}
	return n;
}

int
nvmlInit_v2(void)
{
	return 0;
}

int
nvmlShutdown(void)
{
	return 0;
}

int
nvmlDeviceGetCount_v2(unsigned int *count)
{
	unsigned long long v[MAX];
	unsigned int n = numbers("FAKE_NVML_USED", v);

	*count = n ? n : 1;
	return 0;
}

int
nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
	*device = (void *)(unsigned long)(index + 1);
	return index < MAX ? 0 : 2;
}

int
nvmlDeviceGetMemoryInfo(void *device, void *memory)
{
	unsigned long long v[MAX];
	unsigned int n = numbers("FAKE_NVML_USED", v), i = (unsigned int)(unsigned long)device - 1;
	struct memory *m = memory;
	const char *calls = getenv("FAKE_NVML_CALLS");
	FILE *f;

	m->total = 80ULL << 30;
	m->used = i < n ? v[i] << 20 : 0;
	m->free = m->total - m->used;
	if (calls && (f = fopen(calls, "a"))) {
		fprintf(f, "%u %llu\n", i, m->used >> 20);
		fclose(f);
	}
	return 0;
}

int
nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, void *infos)
{
	unsigned long long v[MAX];
	unsigned int n = (unsigned long)device == 1 ? numbers("FAKE_NVML_PIDS", v) : 0;
	struct process_info *p = infos;

	if (n > *count) {
		*count = n;
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	}
	for (unsigned int i = 0; i < n; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].pid = (unsigned int)v[i];
	}
	*count = n;
	return 0;
}

const char *
nvmlErrorString(int r)
{
	return r ? "fake NVML error" : "Success";
}
