// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_pd DEVICE COUNT: through the provider library, allocates COUNT
 * protection domains on DEVICE, frees half of them explicitly and leaves the
 * rest for ibv_close_device() to release. Prints what it did; exits 0 only
 * if every call behaved.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	struct ibv_pd **pds;
	int count, i, err;

	if (argc != 3 || (count = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: %s DEVICE COUNT\n", argv[0]);
		return 2;
	}
	ctx = open_device_by_name(argv[1]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	pds = calloc(count, sizeof(*pds));
	if (!pds)
		return 1;
	for (i = 0; i < count; i++) {
		pds[i] = ibv_alloc_pd(ctx);
		if (!pds[i]) {
			fprintf(stderr, "ibv_alloc_pd #%d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	printf("allocated %d PDs\n", count);
	for (i = 0; i < count / 2; i++) {
		err = ibv_dealloc_pd(pds[i]);
		if (err) {
			fprintf(stderr, "ibv_dealloc_pd #%d: %s\n", i, strerror(err));
			return 1;
		}
	}
	printf("freed %d PDs, closing the device with %d still allocated\n",
	       count / 2, count - count / 2);
	if (ibv_close_device(ctx)) {
		perror("ibv_close_device");
		return 1;
	}
	free(pds);
	CHECK(1, "closed the device");
	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
