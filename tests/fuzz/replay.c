/* replay.c — main() for fuzz targets built without libFuzzer: feeds every file
 * of the corpus directories (or files) given as arguments to
 * LLVMFuzzerTestOneInput, then a few thousand deterministic mutations of each,
 * so that the targets run in every test build. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
run_one(const char *path)
{
	char *buf;
	size_t len;

	if (read_file(path, 1 << 20, &buf, &len) < 0) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		exit(1);
	}
	LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
	for (int i = 0; i < 2000; i++) {
		size_t n = len + (next_rand() % 16);
		uint8_t *m = xmalloc(n + 1);

		memcpy(m, buf, len);
		for (size_t j = len; j < n; j++) {
			m[j] = (uint8_t)next_rand();
		}
		for (int k = 0; k < 4 && n > 0; k++) {
			m[next_rand() % n] = (uint8_t)next_rand();
		}
		LLVMFuzzerTestOneInput(m, next_rand() % (n + 1));
		free(m);
	}
	free(buf);
}

int
main(int argc, char **argv)
{
	int files = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			run_one(argv[i]);
			files++;
			continue;
		}
		d = opendir(argv[i]);
		while ((de = readdir(d))) {
			char *p;

			if (de->d_name[0] == '.') {
				continue;
			}
			p = xasprintf("%s/%s", argv[i], de->d_name);
			run_one(p);
			free(p);
			files++;
		}
		closedir(d);
	}
	printf("replayed %d inputs (with mutations)\n", files);
	return files > 0 ? 0 : 1;
}
