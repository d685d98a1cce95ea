/* SPDX-License-Identifier: GPL-2.0 */
/* Small helpers shared by the selftests' verbs programs. */
#ifndef SROCE_SELFTEST_COMMON_H
#define SROCE_SELFTEST_COMMON_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* CHECK(cond, fmt, ...): print "ok ..." or "FAIL ..." and count failures. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			printf("ok   ");                                       \
		} else {                                                       \
			printf("FAIL ");                                       \
			failures++;                                            \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

static inline struct ibv_context *open_device_by_name(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

#endif
