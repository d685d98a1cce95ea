// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_mr DEVICE MODE: memory registration through the provider library.
 *
 *   basic    registers regions of several sizes, alignments and access
 *            rights, checks their keys, the errors of bad registrations and
 *            (as root) that the pages are pinned while registered and
 *            unpinned after deregistration; an on-demand paging
 *            registration, which pins nothing, if the device reports ODP
 *            (else it must fail with EOPNOTSUPP); deregisters everything.
 *   leave N  registers N regions of 64 KiB and exits without deregistering
 *            or closing the device: the kernel must release them.
 *   memlock  sets RLIMIT_MEMLOCK to 64 KiB, drops root (so CAP_IPC_LOCK),
 *            and checks that registrations beyond the limit fail (ENOMEM)
 *            while smaller ones succeed.
 *
 * Prints what it did; exits 0 only if everything behaved.
 */
#include <errno.h>
#include <grp.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "common.h"

#define KiB 1024UL
#define MiB (1024 * KiB)

static long page;

#define EXPECT(cond, ...)                                         \
	do {                                                      \
		if (!(cond)) {                                    \
			fprintf(stderr, "FAIL line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);             \
			fputc('\n', stderr);                      \
			failures++;                               \
		}                                                 \
	} while (0)

/*
 * Pages pinned for memory registrations: sroce's own count (debugfs, exact)
 * when readable, else the system-wide FOLL_PIN count, which other activity
 * (9p reads) also moves; -1 if neither is readable.
 */
static long pinned_pages(void)
{
	unsigned long long acq = 0, rel = 0, v;
	char name[64];
	long n;
	FILE *f;

	f = fopen("/sys/kernel/debug/sroce/pinned_pages", "r");
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
		return n;
	}
	f = fopen("/proc/sys/vm/stat_refresh", "w");
	if (!f)
		return -1;
	fputs("1\n", f);
	fclose(f);
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %llu", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			acq = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			rel = v;
	}
	fclose(f);
	return (long)(acq - rel);
}

/*
 * The pin count once it reaches `want`, or after 3 s whatever it is (a
 * registration's pins go when its device file is released; the
 * system-wide count also moves with other activity for a moment).
 */
static long pinned_settled(long want)
{
	long n = pinned_pages();
	int i;

	for (i = 0; i < 30 && n != want; i++) {
		usleep(100 * 1000);
		n = pinned_pages();
	}
	return n;
}

static void *map(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

/* Registration must fail with errno `want`. */
static void expect_fail(struct ibv_pd *pd, void *addr, size_t len, int access,
			int want, const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	if (mr) {
		EXPECT(0, "%s: registered, expected %s", what, strerror(want));
		ibv_dereg_mr(mr);
		return;
	}
	EXPECT(errno == want, "%s: %s, expected %s", what, strerror(errno),
	      strerror(want));
	printf("%s: %s as expected\n", what, strerror(errno));
}

struct region {
	const char *what;
	size_t offset, len;
	int access;
};

static int basic(struct ibv_context *ctx)
{
	const int lw = IBV_ACCESS_LOCAL_WRITE;
	const struct region regions[] = {
		{ "1 byte, local read only", 0, 1, 0 },
		{ "1 byte at the end of a page", page - 1, 1, lw },
		{ "2 bytes across a page boundary", page - 1, 2, lw },
		{ "3 pages at an odd offset", 123, 3 * page, lw | IBV_ACCESS_REMOTE_READ },
		{ "1 MiB remote write", 0, MiB, lw | IBV_ACCESS_REMOTE_WRITE },
		{ "64 KiB remote atomic", 8, 64 * KiB, lw | IBV_ACCESS_REMOTE_ATOMIC },
		{ "64 KiB remote read only", 0, 64 * KiB, IBV_ACCESS_REMOTE_READ },
		{ "1 MiB + 1 all rights", 1, MiB,
		  lw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING },
	};
	enum { N = sizeof(regions) / sizeof(regions[0]) };
	struct ibv_mr *mrs[N];
	uint32_t first_key;
	size_t buf_len = 4 * MiB;
	char *buf, *ro, *hole;
	struct ibv_pd *pd;
	long base, held = 0;
	int i, j;

	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		perror("ibv_alloc_pd");
		return 1;
	}
	buf = map(buf_len, PROT_READ | PROT_WRITE);
	base = pinned_pages();

	for (i = 0; i < N; i++) {
		const struct region *r = &regions[i];

		mrs[i] = ibv_reg_mr(pd, buf + r->offset, r->len, r->access);
		if (!mrs[i]) {
			EXPECT(0, "%s: ibv_reg_mr: %s", r->what, strerror(errno));
			return 1;
		}
		EXPECT(mrs[i]->lkey != 0 && mrs[i]->rkey != 0,
		      "%s: zero key (lkey %#x rkey %#x)", r->what,
		      mrs[i]->lkey, mrs[i]->rkey);
		EXPECT(mrs[i]->addr == buf + r->offset && mrs[i]->length == r->len,
		      "%s: wrong addr/length", r->what);
		for (j = 0; j < i; j++)
			EXPECT(mrs[i]->lkey != mrs[j]->lkey &&
				      mrs[i]->rkey != mrs[j]->rkey,
			      "%s: keys equal to those of '%s'", r->what,
			      regions[j].what);
		printf("registered %s: lkey %#x rkey %#x\n", r->what,
		       mrs[i]->lkey, mrs[i]->rkey);
	}
	if (base >= 0) {
		/* Every region's pages; regions overlap, pins do not merge. */
		long want = 0;

		for (i = 0; i < N; i++) {
			uintptr_t s = (uintptr_t)buf + regions[i].offset;
			uintptr_t e = s + regions[i].len;

			want += (long)(((e + page - 1) & ~(page - 1)) -
				       (s & ~(page - 1))) / page;
		}
		held = pinned_settled(base + want);
		EXPECT(held - base == want, "pinned %ld pages, expected %ld",
		      held - base, want);
		printf("pinned %ld pages while registered\n", held - base);
	}

	/* Bad registrations. */
	hole = map(page, PROT_READ | PROT_WRITE);
	munmap(hole, page);
	expect_fail(pd, hole, page, lw, EFAULT, "unmapped memory");
	ro = map(page, PROT_READ);
	expect_fail(pd, ro, page, lw, EFAULT, "read-only memory for writing");
	expect_fail(pd, buf, page, IBV_ACCESS_REMOTE_WRITE, EINVAL,
		    "remote write without local write");
	expect_fail(pd, buf, page, IBV_ACCESS_REMOTE_ATOMIC, EINVAL,
		    "remote atomic without local write");
	expect_fail(pd, buf, 0, lw, EINVAL, "zero length");
	{
		/* An iova range that wraps past 2^64 (the core checks the
		 * address, not the iova). */
		struct ibv_mr *mr;

		errno = 0;
		mr = ibv_reg_mr_iova(pd, buf, 2 * page, (uint64_t)0 - page, lw);
		EXPECT(!mr && errno == EINVAL, "an iova range that wraps: %s, expected %s",
		       mr ? "registered" : strerror(errno), strerror(EINVAL));
		if (mr)
			ibv_dereg_mr(mr);
		else
			printf("an iova range that wraps: %s as expected\n", strerror(errno));
	}
	{
		/* On-demand paging: registers, pinning nothing, where the device
		 * reports it; else refused. */
		struct ibv_device_attr_ex x;
		struct ibv_mr *mr;

		memset(&x, 0, sizeof(x));
		if (!ibv_query_device_ex(ctx, NULL, &x) &&
		    (x.odp_caps.general_caps & IBV_ODP_SUPPORT)) {
			mr = ibv_reg_mr(pd, buf, MiB, lw | IBV_ACCESS_ON_DEMAND);
			EXPECT(mr, "on-demand paging: %s, expected a registration (the device reports ODP)",
			       strerror(errno));
			if (mr) {
				printf("on-demand paging: registered\n");
				if (base >= 0)
					EXPECT(pinned_settled(held) == held,
					       "an on-demand registration pinned pages");
				EXPECT(!ibv_dereg_mr(mr), "on-demand paging: ibv_dereg_mr");
			}
		} else {
			expect_fail(pd, buf, page, lw | IBV_ACCESS_ON_DEMAND, EOPNOTSUPP,
				    "on-demand paging");
		}
	}
	{
		/* Read-only memory is fine without write rights. */
		struct ibv_mr *mr = ibv_reg_mr(pd, ro, page, IBV_ACCESS_REMOTE_READ);

		EXPECT(mr, "read-only memory for reading: %s", strerror(errno));
		if (mr)
			ibv_dereg_mr(mr);
	}
	if (base >= 0)
		EXPECT(pinned_settled(held) == held, "failed registrations left pins");

	first_key = mrs[0]->lkey;
	for (i = 0; i < N; i++) {
		int err = ibv_dereg_mr(mrs[i]);

		EXPECT(!err, "%s: ibv_dereg_mr: %s", regions[i].what, strerror(err));
	}
	if (base >= 0) {
		long left = pinned_settled(base) - base;

		EXPECT(left == 0, "pins left after deregistration: %ld", left);
		printf("all pins released\n");
	}

	/* A new registration never gets a key still known from before. */
	mrs[0] = ibv_reg_mr(pd, buf, page, lw);
	EXPECT(mrs[0], "re-registration: %s", strerror(errno));
	if (mrs[0]) {
		EXPECT(mrs[0]->lkey != first_key, "key %#x reused", first_key);
		ibv_dereg_mr(mrs[0]);
	}
	EXPECT(!ibv_dealloc_pd(pd), "ibv_dealloc_pd");
	return 0;
}

static int leave(struct ibv_context *ctx, int n)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *buf;
	int i;

	if (!pd) {
		perror("ibv_alloc_pd");
		return 1;
	}
	buf = map(n * 64 * KiB, PROT_READ | PROT_WRITE);
	for (i = 0; i < n; i++) {
		if (!ibv_reg_mr(pd, buf + i * 64 * KiB, 64 * KiB,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
			EXPECT(0, "ibv_reg_mr #%d: %s", i, strerror(errno));
			return 1;
		}
	}
	printf("registered %d regions, exiting without deregistering\n", n);
	return 0;
}

static int memlock(const char *name)
{
	struct rlimit lim = { 64 * KiB, 64 * KiB };
	struct ibv_context *ctx;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	char *buf;

	/* Without root there is no CAP_IPC_LOCK to bypass the limit. */
	if (setrlimit(RLIMIT_MEMLOCK, &lim) || setgroups(0, NULL) ||
	    setgid(65534) || setuid(65534)) {
		perror("dropping privileges");
		return 1;
	}
	ctx = open_device_by_name(name);
	if (!ctx) {
		fprintf(stderr, "cannot open %s as nobody\n", name);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		perror("ibv_alloc_pd");
		return 1;
	}
	buf = map(MiB, PROT_READ | PROT_WRITE);
	expect_fail(pd, buf, MiB, IBV_ACCESS_LOCAL_WRITE, ENOMEM,
		    "1 MiB over a 64 KiB RLIMIT_MEMLOCK");
	mr = ibv_reg_mr(pd, buf, 32 * KiB, IBV_ACCESS_LOCAL_WRITE);
	EXPECT(mr, "32 KiB under the limit: %s", strerror(errno));
	if (mr) {
		printf("32 KiB under the limit: registered\n");
		/* The pinned pages count against the limit until released. */
		expect_fail(pd, buf + 32 * KiB, 64 * KiB - 32 * KiB + page,
			    IBV_ACCESS_LOCAL_WRITE, ENOMEM,
			    "a second region past the limit");
		EXPECT(!ibv_dereg_mr(mr), "ibv_dereg_mr");
		mr = ibv_reg_mr(pd, buf, 64 * KiB, IBV_ACCESS_LOCAL_WRITE);
		EXPECT(mr, "64 KiB after release: %s", strerror(errno));
		if (mr)
			ibv_dereg_mr(mr);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	int ret;

	page = sysconf(_SC_PAGESIZE);
	if (argc < 3) {
		fprintf(stderr, "usage: %s DEVICE basic|leave N|memlock\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[2], "memlock")) {
		ret = memlock(argv[1]);
	} else {
		ctx = open_device_by_name(argv[1]);
		if (!ctx) {
			fprintf(stderr, "cannot open %s\n", argv[1]);
			return 1;
		}
		if (!strcmp(argv[2], "basic"))
			ret = basic(ctx);
		else if (!strcmp(argv[2], "leave") && argc == 4)
			ret = leave(ctx, atoi(argv[3]));
		else
			ret = 2;
		if (ret == 0 && !strcmp(argv[2], "basic"))
			EXPECT(!ibv_close_device(ctx), "ibv_close_device");
	}
	if (ret || failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return ret ? ret : 1;
	}
	printf("ok\n");
	return 0;
}
