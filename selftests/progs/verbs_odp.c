// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_odp DEV_A GID_A DEV_B GID_B [rxe] [aligned]: on-demand paging
 * (IBV_ACCESS_ON_DEMAND) between A, which requests, and B, which owns the
 * target memory. Every buffer is a private anonymous mapping of its own,
 * registered ODP with all rights before the program touches it, if it ever
 * does, so that each transfer finds pages the MR has never seen:
 *   - both devices report ODP_SUPPORT, SEND, RECV, WRITE, READ, ATOMIC and
 *     SRQ_RECV for RC, SEND and RECV for UD (ibv_query_device_ex);
 *   - registering never-touched memory succeeds and faults nothing in
 *     (mincore); implicit ODP (NULL, SIZE_MAX) is refused (errno printed)
 *     unless the device reports ODP_SUPPORT_IMPLICIT;
 *   - implicit ODP, where reported: one MR over B's whole address space
 *     (its iovas the addresses) takes a 1 MiB WRITE into memory mapped
 *     after it was registered, a READ back, a FETCH_AND_ADD, a SEND into
 *     a receive buffer under it, a 2 MiB WRITE and READ across a chunk
 *     boundary (packets straddling it), zeros after MADV_DONTNEED, and
 *     WRITEs to addresses unmapped or never mapped fail with
 *     REM_ACCESS_ERR;
 *   - RC SEND, WRITE and READ of 8 bytes (across a page boundary), 4 KiB and
 *     1 MiB (1024 packets at path MTU 1024) into never-touched memory, a
 *     READ of never-touched memory (zeros); compare-and-swap and
 *     fetch-and-add on never-touched words into never-touched result
 *     buffers;
 *   - invalidation: after B drops its pages (MADV_DONTNEED) a READ returns
 *     zeros, never the old bytes, a WRITE lands, a FETCH_AND_ADD finds 0;
 *     after B unmaps its buffer and maps fresh memory at the same address
 *     (MAP_FIXED; the MR stays registered and follows the address) a READ
 *     returns zeros and a WRITE lands; a SEND from a buffer A dropped sends
 *     zeros, then what A wrote there since; a READ lands in a destination A
 *     dropped;
 *   - transparent huge pages (4 MiB, 2 MiB aligned, MADV_HUGEPAGE, one half
 *     faulted in by the CPU, the other by the device): a 4 MiB WRITE and
 *     READ; one page dropped from a huge page (a split) then reads as zeros
 *     and takes a WRITE (a note, and skipped, without THP);
 *   - ibv_advise_mr: PREFETCH_WRITE (waited for) makes never-touched pages
 *     resident (mincore) and a WRITE then lands without a page fault at B
 *     (sroce's odp_page_faults); PREFETCH and
 *     PREFETCH_NO_FAULT are accepted; PREFETCH_WRITE on an ODP MR without
 *     write rights is EPERM (rxe: EINVAL, a note); for sroce only, EINVAL
 *     for a pinned MR or a range outside the MR (rxe would take a pinned
 *     MR's umem for an ODP one);
 *   - an RC SEND into SRQ receives in never-touched memory;
 *   - UC (not in the ODP capabilities, but sroce pauses and holds the
 *     same way): a 64 KiB SEND and WRITE with immediate from and into
 *     never-touched memory arrive whole (rxe: a note if not);
 *   - UD SENDs of 8, 512 and 1024 bytes into never-touched receive buffers
 *     (GRH + payload across a page boundary);
 *   - errors, each completing within the timeout: B's buffer unmapped
 *     under its MR after use: WRITE, READ and FETCH_AND_ADD fail with
 *     REM_ACCESS_ERR; A's SEND source unmapped: LOC_PROT_ERR; A's READ
 *     destination or B's receive buffer unmapped: error completions; an ODP
 *     MR over a range that was never mapped (registering it may succeed or
 *     fail): a WRITE into it fails until memory is mapped there, then lands;
 *     each of these MRs deregisters;
 *   - no page pinned: sroce's pinned_pages (debugfs) does not move while ODP
 *     MRs are registered and used, and the system-wide nr_foll_pin_acquired
 *     grows by fewer pages than went through ODP memory.
 * Every completion is IBV_WC_SUCCESS unless said; data is checked byte for
 * byte with patterns that differ per transfer and contain no zero byte, and
 * the bytes around a transfer must still be zero.
 *
 * "aligned": the same with every transfer, every packet of one (path MTU
 * 4096, which the ports must carry), every UD payload and every atomic's
 * result starting at a page boundary: the only geometry rxe's ODP copies
 * get right (in 7.3 they copy from and to the start of the page, whatever
 * the offset in it, and do not advance past a page).
 *
 * "rxe" (the reference run against the kernel's rxe): the checks only sroce
 * is held to (the exact error statuses; sroce's pinned_pages, which rxe does
 * not have) print "note: ..." instead of failing. rxe completes a SEND from
 * unmapped memory as flushed (WR_FLUSH_ERR), not LOC_PROT_ERR.
 *
 * verbs_odp DEV_A GID_A DEV_B GID_B [rxe] [aligned] leave: RC QPs, ODP MRs
 * on both sides (one over a range unmapped since), a WRITE and a READ, then
 * exit without freeing anything (the caller checks that nothing stays
 * pinned or referenced).
 *
 * One line per check; "all checks passed" and exit 0 only if all passed.
 */
#include <inttypes.h>
#include <sys/mman.h>
#include "common.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define TIMEOUT_MS 20000
#define ODP_ACCESS (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define UD_QKEY 0x11111111
#define GRH 40

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	int gid_index;
	union ibv_gid gid;
};

/* An RC QP of A's connected to one of B's (receiving from srq if set). */
struct pair {
	struct ibv_qp *a, *b;
	struct ibv_srq *srq;
};

/* A mapping of its own with an ODP MR over it. */
struct region {
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
};

static struct side A, B;
static long page;
static int rxe_ref;
/* "aligned": every transfer and every piece of one (a packet, a UD
 * payload, an atomic's result) starts at a page boundary, path MTU 4096. */
static int aligned;
static enum ibv_mtu path_mtu = IBV_MTU_1024;
static uint32_t psn = 0x2000;
static uint64_t wrid;
static unsigned int seed = 4242;
/* Pages that went through ODP memory: each transfer's length, once. */
static long moved_pages;
/* B's device name (for its counters). */
static const char *dev_b;
/* sroce's pinned_pages and nr_foll_pin_acquired at the start (-1: none). */
static long pinned0;
static long long acquired0;
/* Addresses for mappings that are unmapped while registered: far below
 * where mmap places anything, so that no later mapping (a QP's ring) fills
 * the hole they leave. */
static uintptr_t far_next = 0x400000000000UL;

/* A check only sroce is held to: under "rxe", a failure is a note. */
#define CHECK_SROCE(cond, ...) CHECK_OR_NOTE(rxe_ref, cond, __VA_ARGS__)

static const char *st(int r)
{
	static char s[64];

	if (r == -1)
		return "post failed";
	if (r == -2) {
		snprintf(s, sizeof(s), "no completion within %ld s", scaled_ms(TIMEOUT_MS) / 1000);
		return s;
	}
	if (r == -3)
		return "completion of another work request";
	return ibv_wc_status_str(r);
}

/* errno's text after a failed call, "" after a good one. */
static const char *why(int failed)
{
	static char s[80];

	if (!failed)
		return "";
	snprintf(s, sizeof(s), " (%s)", strerror(errno));
	return s;
}

/* A call that returns 0 on success (else -1 and errno), as a check. */
static int ok_call(int ret, const char *what)
{
	CHECK(ret == 0, "%s%s", what, why(ret != 0));
	return ret;
}

/* ------------------------------------------------------------- memory */

/* n bytes of a pattern no other transfer uses, without zero bytes (a byte
 * that did not arrive shows as the zero of untouched memory). */
static uint8_t *pattern(size_t n)
{
	uint8_t *p = malloc(n);
	size_t i;

	if (!p) {
		perror("malloc");
		exit(1);
	}
	fill(p, n, seed++ * 7919);
	for (i = 0; i < n; i++)
		if (!p[i])
			p[i] = 0xa5;
	return p;
}

/* What a check says about the bytes it compared. */
static char diff_msg[128];

/* p[0, n) equals want[0, n) (zeros if want is NULL); else diff_msg says
 * where it first differs (at offset base + i). */
static int bytes_are(const uint8_t *p, const uint8_t *want, size_t n, size_t base)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint8_t w = want ? want[i] : 0;

		if (p[i] != w) {
			snprintf(diff_msg, sizeof(diff_msg), "byte %zu is %#x, expected %#x",
				 base + i, p[i], w);
			return 0;
		}
	}
	snprintf(diff_msg, sizeof(diff_msg), "bytes as expected");
	return 1;
}

/* r holds want[0, len) at off (zeros if want is NULL) and zeros around it. */
static int holds(const struct region *r, size_t off, const uint8_t *want, size_t len)
{
	return bytes_are(r->buf, NULL, off, 0) && bytes_are(r->buf + off, want, len, off) &&
	       bytes_are(r->buf + off + len, NULL, r->len - off - len, off + len);
}

/* An ODP MR over r's mapping on s's PD. */
static int region_reg(struct side *s, struct region *r)
{
	r->mr = ibv_reg_mr(s->pd, r->buf, r->len, ODP_ACCESS);
	if (!r->mr) {
		CHECK(0, "ODP registration of %zu bytes at %p%s", r->len, (void *)r->buf, why(1));
		return -1;
	}
	return 0;
}

/* A fresh mapping of len bytes (at the next far address if far), registered
 * ODP before anything touches it. */
static int region_new(struct side *s, struct region *r, size_t len, int far)
{
	void *want = NULL;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;

	if (far) {
		want = (void *)far_next;
		far_next += 64 * MiB;
		flags |= MAP_FIXED_NOREPLACE;
	}
	r->len = len;
	r->mr = NULL;
	r->buf = mmap(want, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (r->buf == MAP_FAILED) {
		r->buf = NULL;
		CHECK(0, "mmap of %zu bytes%s", len, why(1));
		return -1;
	}
	return region_reg(s, r);
}

/* Deregisters and unmaps (a region unmapped before has buf NULL). */
static void region_free(struct region *r)
{
	if (r->mr) {
		int ret = ibv_dereg_mr(r->mr);

		if (ret)
			CHECK(0, "ibv_dereg_mr of an ODP MR: %s", strerror(ret));
	}
	if (r->buf)
		munmap(r->buf, r->len);
	r->mr = NULL;
	r->buf = NULL;
}

/* Unmaps r's memory, leaving its MR (buf stays the address). */
static int region_unmap(struct region *r)
{
	return munmap(r->buf, r->len);
}

static uint64_t at(const struct region *r, size_t off)
{
	return (uintptr_t)(r->buf + off);
}

/* An offset in a buffer so that a transfer of len bytes crosses a page
 * boundary (0 if aligned), and a length for the buffer with an untouched
 * page after it. */
static size_t off_for(size_t len)
{
	if (aligned)
		return 0;
	return len < 64 ? page - 4 : len <= 4096 ? 100 : 2048;
}

static size_t span(size_t off, size_t len)
{
	return (off + len + page - 1) / page * page + page;
}

/* sroce's pinned_pages (debugfs), or -1 if it cannot be read. */
static long sroce_pinned(void)
{
	FILE *f = fopen("/sys/kernel/debug/sroce/pinned_pages", "r");
	long n = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

/* nr_foll_pin_acquired after folding the per-CPU counts (root), or -1. */
static long long pins_acquired(void)
{
	unsigned long long v;
	long long n = -1;
	char name[64];
	FILE *f;

	f = fopen("/proc/sys/vm/stat_refresh", "w");
	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %llu", name, &v) == 2)
		if (!strcmp(name, "nr_foll_pin_acquired"))
			n = (long long)v;
	fclose(f);
	return n;
}

/* Nothing pinned for ODP memory so far (ODP MRs registered, as said in when). */
static void no_pins(const char *when)
{
	static int noted;
	long n = sroce_pinned();
	long long acq = pins_acquired();

	if (pinned0 >= 0)
		CHECK(n == pinned0, "%s: sroce's pinned_pages is %ld, as before any ODP MR", when, n);
	else if (!rxe_ref)
		CHECK(0, "%s: sroce's pinned_pages (debugfs) cannot be read", when);
	else if (!noted++)
		printf("note: rxe has no count of its pinned pages: not checked\n");
	if (acquired0 >= 0 && acq >= 0)
		CHECK(acq - acquired0 < moved_pages,
		      "%s: nr_foll_pin_acquired grew by %lld, less than the %ld pages moved through ODP MRs",
		      when, acq - acquired0, moved_pages);
	else
		printf("     (%s: no nr_foll_pin_acquired in /proc/vmstat)\n", when);
}

/* -------------------------------------------------------------- verbs */

static int open_side(struct side *s, const char *dev, int gid_index)
{
	s->gid_index = gid_index;
	return open_port(dev, gid_index, 64, &s->ctx, &s->gid, &s->pd, &s->scq, &s->rcq);
}

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type type, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->scq, .recv_cq = s->rcq, .srq = srq, .qp_type = type,
		.cap = { .max_send_wr = 16, .max_recv_wr = srq ? 0 : 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		return NULL;
	if (type == IBV_QPT_UD) {
		a.qkey = UD_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(qp, &a, mask)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

static void pair_free(struct pair *p)
{
	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	p->a = p->b = NULL;
	drain(A.scq);
	drain(A.rcq);
	drain(B.scq);
	drain(B.rcq);
}

/* Fresh, connected QPs (after an error completion both are in ERR). */
static int pair_new(struct pair *p)
{
	uint32_t pa = psn, pb = psn + 0x777;

	psn += 0x10000;
	pair_free(p);
	p->a = make_qp(&A, IBV_QPT_RC, NULL);
	p->b = make_qp(&B, IBV_QPT_RC, p->srq);
	if (!p->a || !p->b)
		return -1;
	return rc_connect_mtu(p->a, A.gid_index, &B.gid, p->b->qp_num, pa, pb, 4, path_mtu) ||
	       rc_connect_mtu(p->b, B.gid_index, &A.gid, p->a->qp_num, pb, pa, 4, path_mtu) ? -1 : 0;
}

static void renew(struct pair *p, const char *what)
{
	int r = pair_new(p);

	CHECK(r == 0, "%s%s", what, why(r));
}

/* The next completion on cq: its status if it is wr_id's, else < 0. */
static int wait_wc(struct ibv_cq *cq, uint64_t id, struct ibv_wc *wc)
{
	return wait_wc_of(cq, id, wc, TIMEOUT_MS);
}

/*
 * A posts op on p->a with l's [loff, loff + len) (8 bytes for an atomic's
 * result): a SEND, an RDMA WRITE or READ at raddr, or an atomic at raddr.
 * Its completion's status.
 */
static int a_op(struct pair *p, enum ibv_wr_opcode op, const struct region *l, size_t loff,
		uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		struct ibv_wc *wc)
{
	struct ibv_sge g = { .addr = at(l, loff), .length = len, .lkey = l->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = ++wrid, .sg_list = &g, .num_sge = 1,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;
	int r;

	snprintf(diff_msg, sizeof(diff_msg), "-");
	switch (op) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		g.length = 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
		break;
	case IBV_WR_SEND:
		break;
	default:
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(p->a, &wr, &bad))
		return -1;
	r = wait_wc(A.scq, wr.wr_id, wc);
	if (r == IBV_WC_SUCCESS)
		moved_pages += (g.length + page - 1) / page;
	return r;
}

/* A receive of r's [off, off + len) on qp, or on srq if set; its wr_id. */
static uint64_t post_recv(struct ibv_qp *qp, struct ibv_srq *srq, const struct region *r,
			  size_t off, uint32_t len)
{
	struct ibv_sge g = { .addr = at(r, off), .length = len, .lkey = r->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = ++wrid, .sg_list = &g, .num_sge = 1 }, *bad;
	int ret = srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);

	if (ret)
		CHECK(0, "posting a receive: %s", strerror(ret));
	return wr.wr_id;
}

/* A WRITE of s's [off, off + len) to the same offset of t. */
static int write_to(struct pair *p, const struct region *s, const struct region *t, size_t off,
		    uint32_t len)
{
	struct ibv_wc wc;

	return a_op(p, IBV_WR_RDMA_WRITE, s, off, len, at(t, off), t->mr->rkey, 0, 0, &wc);
}

/* A READ of t's [off, off + len) into the same offset of d. */
static int read_from(struct pair *p, const struct region *t, const struct region *d, size_t off,
		     uint32_t len)
{
	struct ibv_wc wc;
	int r = a_op(p, IBV_WR_RDMA_READ, d, off, len, at(t, off), t->mr->rkey, 0, 0, &wc);

	return r == IBV_WC_SUCCESS && wc.byte_len != len ? -3 : r;
}

/* ------------------------------------------------------------ the checks */

/* The device's ODP capabilities; 0 if it has no ODP at all. */
static int test_caps(struct side *s, const char *name)
{
	const uint32_t rc_want = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
				 IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
				 IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	const uint32_t ud_want = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
	struct ibv_device_attr_ex x;
	uint32_t rc, ud;
	int ret;

	memset(&x, 0, sizeof(x));
	ret = ibv_query_device_ex(s->ctx, NULL, &x);
	rc = x.odp_caps.per_transport_caps.rc_odp_caps;
	ud = x.odp_caps.per_transport_caps.ud_odp_caps;
	CHECK(ret == 0 && (x.odp_caps.general_caps & IBV_ODP_SUPPORT),
	      "%s: general_odp_caps %#" PRIx64 " has ODP_SUPPORT (ibv_query_device_ex returned %d)",
	      name, (uint64_t)x.odp_caps.general_caps, ret);
	CHECK((rc & rc_want) == rc_want,
	      "%s: rc_odp_caps %#x has SEND, RECV, WRITE, READ, ATOMIC, SRQ_RECV (%#x)", name, rc,
	      rc_want);
	CHECK((ud & ud_want) == ud_want, "%s: ud_odp_caps %#x has SEND, RECV (%#x)", name, ud,
	      ud_want);
	return ret == 0 && (x.odp_caps.general_caps & IBV_ODP_SUPPORT);
}

/* Registering never-touched memory; implicit ODP. */
static void test_register(void)
{
	struct ibv_device_attr_ex x;
	struct region r = { 0 };
	unsigned char vec[256];
	struct ibv_mr *mr;
	int i, resident = 0, e;

	if (region_new(&B, &r, MiB, 0))
		return;
	CHECK(r.mr->lkey && r.mr->rkey && r.mr->addr == r.buf && r.mr->length == MiB,
	      "1 MiB of never-touched memory registered ODP with all rights: lkey %#x rkey %#x",
	      r.mr->lkey, r.mr->rkey);
	if (mincore(r.buf, MiB, vec) == 0) {
		for (i = 0; i < (int)(MiB / page) && i < 256; i++)
			resident += vec[i] & 1;
		CHECK(resident == 0, "registering it faulted nothing in: %d pages resident (mincore)",
		      resident);
	}
	region_free(&r);

	memset(&x, 0, sizeof(x));
	ibv_query_device_ex(B.ctx, NULL, &x);
	errno = 0;
	mr = ibv_reg_mr(B.pd, NULL, SIZE_MAX, ODP_ACCESS);
	e = errno;
	if (x.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) {
		CHECK(mr != NULL, "implicit ODP (NULL, SIZE_MAX), which the device reports: %s",
		      mr ? "registered" : strerror(e));
	} else {
		CHECK(mr == NULL, "implicit ODP (NULL, SIZE_MAX) is refused: errno %d (%s)", e,
		      mr ? "registered" : strerror(e));
	}
	if (mr)
		ibv_dereg_mr(mr);
}

/* A port counter of dev, or -1 (rxe has no ODP counters). */
static long long hw_counter(const char *dev, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * libibverbs' uverbs command for ibv_advise_mr, which providers call; the
 * rxe provider of rdma-core 44 does not, so ibv_advise_mr is EOPNOTSUPP
 * there and the command is sent directly (as newer rdma-core's rxe provider
 * sends it). Private to rdma-core (IBVERBS_PRIVATE_*): weak, and the checks
 * say so when it is missing.
 */
extern int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			     struct ibv_sge *sg_list, uint32_t num_sge) __attribute__((weak));

static int advise(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sge)
{
	static int noted;
	int ret = ibv_advise_mr(pd, advice, flags, sge, 1);

	if (ret != EOPNOTSUPP || !ibv_cmd_advise_mr)
		return ret;
	if (!noted++)
		printf("note: ibv_advise_mr is EOPNOTSUPP in this provider: "
		       "the uverbs command is sent directly\n");
	return ibv_cmd_advise_mr(pd, advice, flags, sge, 1);
}

/* ibv_advise_mr on B's ODP memory, then a WRITE into what was prefetched. */
static void test_advise(struct pair *p)
{
	struct region r = { 0 }, s = { 0 };
	struct ibv_sge sge;
	unsigned char vec[64];
	uint8_t *want;
	struct ibv_mr *ro, *pinned;
	long long faults;
	int i, resident = 0, ret;

	if (region_new(&B, &r, 64 * page, 0) || region_new(&A, &s, 64 * page, 0))
		goto out;
	sge = (struct ibv_sge){ .addr = at(&r, 0), .length = 64 * page, .lkey = r.mr->lkey };
	ret = advise(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge);
	CHECK(ret == 0, "ibv_advise_mr PREFETCH_WRITE (FLUSH) of 64 never-touched pages: %s",
	      strerror(ret));
	if (mincore(r.buf, 64 * page, vec) == 0) {
		for (i = 0; i < 64; i++)
			resident += vec[i] & 1;
		CHECK(resident == 64, "the prefetch faulted them in: %d of 64 pages resident", resident);
	}
	ret = advise(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge);
	CHECK(ret == 0, "ibv_advise_mr PREFETCH (not waited for): %s", strerror(ret));
	ret = advise(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH, &sge);
	CHECK(ret == 0, "ibv_advise_mr PREFETCH_NO_FAULT: %s", strerror(ret));
	want = pattern(16 * page);
	memcpy(s.buf, want, 16 * page);
	/* The source prefetched too (A and B may be one device): no fault. */
	sge = (struct ibv_sge){ .addr = at(&s, 0), .length = 16 * page, .lkey = s.mr->lkey };
	ret = advise(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge);
	CHECK(ret == 0, "ibv_advise_mr PREFETCH of the WRITE's source at A: %s", strerror(ret));
	faults = hw_counter(dev_b, "odp_page_faults");
	CHECK(write_to(p, &s, &r, 0, 16 * page) == IBV_WC_SUCCESS && holds(&r, 0, want, 16 * page),
	      "a 16-page WRITE into the prefetched memory lands");
	if (faults >= 0)
		CHECK(hw_counter(dev_b, "odp_page_faults") == faults,
		      "and B took no page fault for it (odp_page_faults %lld, then %lld)", faults,
		      hw_counter(dev_b, "odp_page_faults"));
	free(want);

	ro = ibv_reg_mr(B.pd, r.buf, 64 * page, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);
	if (ro) {
		sge = (struct ibv_sge){ .addr = at(&r, 0), .length = 64 * page, .lkey = ro->lkey };
		ret = advise(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
			     &sge);
		/* rxe looks the MR up for local write first: EINVAL. */
		if (rxe_ref && ret != EPERM)
			printf("note: rxe: PREFETCH_WRITE on a read-only ODP MR: %s\n",
			       strerror(ret));
		else
			CHECK(ret == EPERM, "PREFETCH_WRITE on a read-only ODP MR is EPERM: %s",
			      strerror(ret));
		ibv_dereg_mr(ro);
	} else {
		CHECK(0, "a read-only ODP MR%s", why(1));
	}
	if (!rxe_ref) {
		sge = (struct ibv_sge){ .addr = at(&r, 0), .length = 65 * page, .lkey = r.mr->lkey };
		ret = advise(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge);
		CHECK(ret == EINVAL, "a range past the MR's end is EINVAL: %s", strerror(ret));
		pinned = ibv_reg_mr(B.pd, r.buf, 64 * page, IBV_ACCESS_LOCAL_WRITE);
		if (pinned) {
			sge = (struct ibv_sge){ .addr = at(&r, 0), .length = page,
						.lkey = pinned->lkey };
			ret = advise(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH,
				     &sge);
			CHECK(ret == EINVAL, "advice for a pinned MR is EINVAL: %s", strerror(ret));
			ibv_dereg_mr(pinned);
		}
	}
out:
	region_free(&r);
	region_free(&s);
}

/* A fresh anonymous mapping of len bytes at want (0: anywhere), not
 * registered: the implicit MR covers it. */
static uint8_t *fresh(void *want, size_t len)
{
	void *m = mmap(want, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

/* Implicit ODP at B: B's memory reached through one MR over all of it. */
static void test_implicit(struct pair *p)
{
	struct ibv_device_attr_ex x;
	struct region s = { 0 }, d = { 0 }, t = { 0 };
	struct ibv_mr *mr;
	struct ibv_wc wc, rwc;
	const size_t len = MiB, big = 2 * MiB, off = aligned ? 0 : 100;
	/* 1 MiB below a 2 MiB chunk's boundary (and a 128 MiB one), in the
	 * far range (see far_next); and an address nothing is ever mapped at. */
	void *across_at = (void *)(0x500000000000UL - MiB);
	const uintptr_t nowhere = 0x500000000000UL + 64 * MiB;
	uint8_t *buf = NULL, *across = NULL, *want = pattern(big);
	uint64_t rid, one = 0;
	int r, rr;

	memset(&x, 0, sizeof(x));
	ibv_query_device_ex(B.ctx, NULL, &x);
	if (!(x.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT)) {
		printf("     (implicit ODP not reported: not tested)\n");
		free(want);
		return;
	}
	mr = ibv_reg_mr(B.pd, NULL, SIZE_MAX, ODP_ACCESS);
	CHECK(mr != NULL, "implicit ODP MR over B's address space%s", why(!mr));
	if (!mr)
		goto out;
	/* Registered before the memory it reaches exists. */
	buf = fresh(NULL, span(off, len));
	across = fresh(across_at, big + page);
	if (!buf || !across || region_new(&A, &s, span(0, big), 0) ||
	    region_new(&A, &d, span(0, big), 0)) {
		CHECK(0, "memory for the implicit MR's tests%s", why(1));
		goto out;
	}
	/* Regions over B's memory under the implicit MR's keys. */
	t = (struct region){ .buf = buf, .len = span(off, len), .mr = mr };
	memcpy(s.buf, want, len);
	r = a_op(p, IBV_WR_RDMA_WRITE, &s, 0, len, (uintptr_t)buf + off, mr->rkey, 0, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, off, want, len),
	      "implicit MR: a 1 MiB WRITE into memory mapped after it was registered: %s, %s",
	      st(r), r == IBV_WC_SUCCESS ? diff_msg : "-");
	r = r == IBV_WC_SUCCESS ? a_op(p, IBV_WR_RDMA_READ, &d, 0, len, (uintptr_t)buf + off,
				       mr->rkey, 0, 0, &wc) : -1;
	CHECK(r == IBV_WC_SUCCESS && bytes_are(d.buf, want, len, 0),
	      "implicit MR: READ of it back: %s, %s", st(r), r == IBV_WC_SUCCESS ? diff_msg : "-");
	/* The mapping's last word, never touched. */
	r = a_op(p, IBV_WR_ATOMIC_FETCH_AND_ADD, &d, 0, 8, (uintptr_t)buf + span(off, len) - 8,
		 mr->rkey, 5, 0, &wc);
	memcpy(&one, d.buf, 8);
	CHECK(r == IBV_WC_SUCCESS && one == 0 && *(uint64_t *)(buf + span(off, len) - 8) == 5,
	      "implicit MR: FETCH_AND_ADD on a fresh word: %s, found %" PRIu64 ", left %" PRIu64,
	      st(r), one, *(uint64_t *)(buf + span(off, len) - 8));
	/* A SEND into a receive buffer under the implicit MR's lkey. */
	memset(buf, 0, span(off, len));
	rid = post_recv(p->b, NULL, &t, off, 4096);
	memcpy(s.buf, want + 4096, 4096);
	r = a_op(p, IBV_WR_SEND, &s, 0, 4096, 0, 0, 0, 0, &wc);
	rr = r == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid, &rwc) : -2;
	CHECK(r == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && bytes_are(buf + off, want + 4096, 4096, off),
	      "implicit MR: a SEND into a receive buffer under its lkey: %s, %s, %s", st(r), st(rr),
	      diff_msg);
	/* Across two chunks (at an offset, packets straddle the boundary). */
	memcpy(s.buf, want, big);
	r = a_op(p, IBV_WR_RDMA_WRITE, &s, 0, big, (uintptr_t)across + off, mr->rkey, 0, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS && bytes_are(across, NULL, off, 0) &&
	      bytes_are(across + off, want, big, off),
	      "implicit MR: a 2 MiB WRITE across a chunk boundary: %s, %s", st(r), diff_msg);
	memset(d.buf, 0, big);
	r = a_op(p, IBV_WR_RDMA_READ, &d, 0, big, (uintptr_t)across + off, mr->rkey, 0, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS && bytes_are(d.buf, want, big, 0),
	      "implicit MR: and READ back: %s, %s", st(r), diff_msg);
	/* Dropped pages read as zeros. */
	madvise(across, big, MADV_DONTNEED);
	memset(d.buf, 0xee, big);
	r = a_op(p, IBV_WR_RDMA_READ, &d, 0, big, (uintptr_t)across, mr->rkey, 0, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS && bytes_are(d.buf, NULL, big, 0),
	      "implicit MR: after MADV_DONTNEED a READ returns zeros: %s, %s", st(r), diff_msg);
	/* Addresses with nothing mapped: one that had memory, one never. */
	munmap(across, big + page);
	across = NULL;
	r = a_op(p, IBV_WR_RDMA_WRITE, &s, 0, 4096, (uintptr_t)across_at, mr->rkey, 0, 0, &wc);
	CHECK(r > IBV_WC_SUCCESS, "implicit MR: a WRITE to an unmapped address fails: %s", st(r));
	CHECK_SROCE(r == IBV_WC_REM_ACCESS_ERR, "implicit MR: it completes with %s: %s",
		    ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), st(r));
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
	r = a_op(p, IBV_WR_RDMA_WRITE, &s, 0, 4096, nowhere, mr->rkey, 0, 0, &wc);
	CHECK_SROCE(r == IBV_WC_REM_ACCESS_ERR,
		    "implicit MR: a WRITE where nothing was ever mapped completes with %s: %s",
		    ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), st(r));
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	if (mr)
		CHECK(ibv_dereg_mr(mr) == 0, "the implicit MR deregisters");
	if (buf)
		munmap(buf, span(off, len));
	if (across)
		munmap(across, big + page);
	region_free(&s);
	region_free(&d);
	free(want);
}

/* RC SEND of len bytes from A's ODP memory into B's never-touched receive
 * buffer. */
static void test_send(struct pair *p, size_t len)
{
	struct region s = { 0 }, t = { 0 };
	size_t off = off_for(len);
	uint8_t *want = pattern(len);
	struct ibv_wc wc, rwc;
	uint64_t rid;
	int r, rr = -2;

	if (region_new(&A, &s, span(off, len), 0) || region_new(&B, &t, span(off, len), 0))
		goto out;
	/* After registration: the MR has not seen even the source's pages. */
	memcpy(s.buf + off, want, len);
	rid = post_recv(p->b, NULL, &t, off, len);
	r = a_op(p, IBV_WR_SEND, &s, off, len, 0, 0, 0, 0, &wc);
	if (r == IBV_WC_SUCCESS)
		rr = wait_wc(B.rcq, rid, &rwc);
	CHECK(r == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && rwc.opcode == IBV_WC_RECV &&
	      rwc.byte_len == len && holds(&t, off, want, len),
	      "RC SEND of %zu bytes into a never-touched receive buffer: %s, receive %s (%u bytes), %s",
	      len, st(r), st(rr), rr == IBV_WC_SUCCESS ? rwc.byte_len : 0,
	      rr == IBV_WC_SUCCESS ? diff_msg : "-");
	if (r != IBV_WC_SUCCESS || rr != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&s);
	region_free(&t);
	free(want);
}

/* RC WRITE of len bytes into B's never-touched memory. */
static void test_write(struct pair *p, size_t len)
{
	struct region s = { 0 }, t = { 0 };
	size_t off = off_for(len);
	uint8_t *want = pattern(len);
	int r;

	if (region_new(&A, &s, span(off, len), 0) || region_new(&B, &t, span(off, len), 0))
		goto out;
	memcpy(s.buf + off, want, len);
	r = write_to(p, &s, &t, off, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, off, want, len),
	      "RC WRITE of %zu bytes into never-touched memory: %s, %s", len, st(r),
	      r == IBV_WC_SUCCESS ? diff_msg : "-");
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&s);
	region_free(&t);
	free(want);
}

/* RC READ of len bytes into A's never-touched memory, then a READ of B's
 * never-touched memory over it (zeros). */
static void test_read(struct pair *p, size_t len)
{
	struct region s = { 0 }, d = { 0 }, z = { 0 };
	size_t off = off_for(len);
	uint8_t *want = pattern(len);
	int r;

	if (region_new(&B, &s, span(off, len), 0) || region_new(&A, &d, span(off, len), 0) ||
	    region_new(&B, &z, span(off, len), 0))
		goto out;
	memcpy(s.buf + off, want, len);
	r = read_from(p, &s, &d, off, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, off, want, len),
	      "RC READ of %zu bytes into never-touched memory: %s, %s", len, st(r),
	      r == IBV_WC_SUCCESS ? diff_msg : "-");
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
	r = read_from(p, &z, &d, off, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, off, NULL, len),
	      "RC READ of %zu bytes of never-touched memory returns zeros: %s, %s", len, st(r),
	      r == IBV_WC_SUCCESS ? diff_msg : "-");
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&s);
	region_free(&d);
	region_free(&z);
	free(want);
}

/* One atomic on B's t at off; the original value lands at A's res + roff. */
static void atomic_ok(struct pair *p, const char *what, enum ibv_wr_opcode op,
		      const struct region *t, size_t off, const struct region *res, size_t roff,
		      uint64_t cmp_add, uint64_t swap, uint64_t orig, uint64_t after)
{
	uint64_t got = 0, now = 0;
	struct ibv_wc wc;
	int r;

	r = a_op(p, op, res, roff, 8, at(t, off), t->mr->rkey, cmp_add, swap, &wc);
	if (r == IBV_WC_SUCCESS) {
		memcpy(&got, res->buf + roff, 8);
		memcpy(&now, t->buf + off, 8);
	}
	CHECK(r == IBV_WC_SUCCESS && got == orig && now == after,
	      "%s: %s, returned %#" PRIx64 " (want %#" PRIx64 "), target now %#" PRIx64
	      " (want %#" PRIx64 ")", what, st(r), got, orig, now, after);
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
}

/* Atomics on never-touched words, results into never-touched memory. */
static void test_atomics(struct pair *p)
{
	const uint64_t x = 0x1122334455667788ULL, y = 0x10000001ULL;
	/* The results side by side, or each at a page of its own. */
	const size_t r = aligned ? page : 8;
	struct region t = { 0 }, res = { 0 };

	if (region_new(&B, &t, 2 * page, 0) || region_new(&A, &res, 4 * page, 0))
		goto out;
	atomic_ok(p, "CMP_AND_SWP 0 -> x on a never-touched word, into a never-touched result",
		  IBV_WR_ATOMIC_CMP_AND_SWP, &t, 64, &res, 0, 0, x, 0, x);
	atomic_ok(p, "FETCH_AND_ADD y on it", IBV_WR_ATOMIC_FETCH_AND_ADD, &t, 64, &res, r, y, 0, x,
		  x + y);
	atomic_ok(p, "CMP_AND_SWP with a wrong compare value", IBV_WR_ATOMIC_CMP_AND_SWP, &t, 64,
		  &res, 2 * r, 1, 7, x + y, x + y);
	atomic_ok(p, "FETCH_AND_ADD y on a word of another never-touched page",
		  IBV_WR_ATOMIC_FETCH_AND_ADD, &t, page + 8, &res, 3 * r, y, 0, 0, y);
out:
	region_free(&t);
	region_free(&res);
}

/* B drops its pages (MADV_DONTNEED) between operations. */
static void test_dontneed(struct pair *p)
{
	const size_t len = 64 * KiB, half = len / 2;
	uint8_t *p1 = pattern(len), *p2 = pattern(len), *mix = calloc(1, len);
	struct region t = { 0 }, d = { 0 };
	struct ibv_wc wc;
	uint64_t got = 0, now = 0;
	int r;

	if (region_new(&B, &t, len, 0) || region_new(&A, &d, len, 0))
		goto out;
	memcpy(d.buf, p1, len);
	r = write_to(p, &d, &t, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, p1, len), "WRITE of 64 KiB: %s, %s", st(r),
	      diff_msg);
	r = read_from(p, &t, &d, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, 0, p1, len), "READ of it back: %s, %s", st(r),
	      diff_msg);
	ok_call(madvise(t.buf, len, MADV_DONTNEED), "B drops the pages (MADV_DONTNEED)");
	/* Before B's CPU touches them again: the device's view must be gone. */
	r = read_from(p, &t, &d, 0, half);
	CHECK(r == IBV_WC_SUCCESS && bytes_are(d.buf, NULL, half, 0),
	      "a READ of the dropped first half returns zeros, not the old bytes: %s, %s", st(r),
	      diff_msg);
	memcpy(d.buf + half, p2 + half, half);
	r = write_to(p, &d, &t, half, half);
	memcpy(mix + half, p2 + half, half);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, mix, len),
	      "a WRITE of new bytes into the dropped second half lands, the first half is zeros: %s, %s",
	      st(r), diff_msg);
	memset(d.buf, 0x5a, len);
	r = read_from(p, &t, &d, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, 0, mix, len),
	      "a READ of all 64 KiB returns zeros and the new bytes: %s, %s", st(r), diff_msg);

	/* An atomic on a dropped word finds 0, not the value it had. */
	r = a_op(p, IBV_WR_ATOMIC_FETCH_AND_ADD, &d, 0, 8, at(&t, 8), t.mr->rkey, 5, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS, "FETCH_AND_ADD 5: %s", st(r));
	ok_call(madvise(t.buf, page, MADV_DONTNEED), "B drops that page");
	r = a_op(p, IBV_WR_ATOMIC_FETCH_AND_ADD, &d, 0, 8, at(&t, 8), t.mr->rkey, 7, 0, &wc);
	memcpy(&got, d.buf, 8);
	memcpy(&now, t.buf + 8, 8);
	CHECK(r == IBV_WC_SUCCESS && got == 0 && now == 7,
	      "FETCH_AND_ADD 7 on the dropped word: %s, returned %" PRIu64 " (want 0), now %" PRIu64
	      " (want 7)", st(r), got, now);
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&t);
	region_free(&d);
	free(p1);
	free(p2);
	free(mix);
}

/* B unmaps its buffer and maps fresh memory at the same address; the MR
 * stays registered and follows the address. */
static void test_remap(struct pair *p)
{
	const size_t len = 64 * KiB;
	uint8_t *p3 = pattern(len), *p4 = pattern(len);
	struct region t = { 0 }, s = { 0 };
	void *m;
	int r;

	if (region_new(&B, &t, len, 0) || region_new(&A, &s, len, 0))
		goto out;
	memcpy(s.buf, p3, len);
	r = write_to(p, &s, &t, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, p3, len), "WRITE of 64 KiB: %s, %s", st(r),
	      diff_msg);
	m = MAP_FAILED;
	if (munmap(t.buf, len) == 0)
		m = mmap(t.buf, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0);
	CHECK(m == t.buf, "B unmaps it and maps fresh memory at the same address%s",
	      why(m != t.buf));
	if (m != t.buf) {
		t.buf = NULL;
		goto out;
	}
	r = read_from(p, &t, &s, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&s, 0, NULL, len),
	      "a READ through the MR returns the new memory's zeros, not the old bytes: %s, %s",
	      st(r), diff_msg);
	memcpy(s.buf, p4, len);
	r = write_to(p, &s, &t, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, p4, len),
	      "a WRITE of new bytes lands in the new memory: %s, %s", st(r), diff_msg);
	memset(s.buf, 0x5a, len);
	r = read_from(p, &t, &s, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&s, 0, p4, len), "a READ returns them: %s, %s", st(r),
	      diff_msg);
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&t);
	region_free(&s);
	free(p3);
	free(p4);
}

/* A drops the pages of a SEND's source and of a READ's destination. */
static void test_local(struct pair *p)
{
	const size_t len = 8 * KiB, off = aligned ? 0 : 100, slot = span(off, len);
	uint8_t *p5 = pattern(len), *p6 = pattern(len);
	struct region s = { 0 }, t = { 0 }, d = { 0 };
	const uint8_t *want[3] = { p5, NULL, p6 };
	const char *what[3] = {
		"a SEND from A's ODP buffer",
		"after A dropped its pages (MADV_DONTNEED), a SEND from it sends zeros, not the old bytes",
		"after A wrote new bytes there, a SEND sends them",
	};
	struct ibv_wc wc, rwc;
	uint64_t rid;
	int i, r, rr;

	if (region_new(&A, &s, slot, 0) || region_new(&B, &t, 3 * slot, 0) ||
	    region_new(&A, &d, slot, 0))
		goto out;
	memcpy(s.buf + off, p5, len);
	for (i = 0; i < 3; i++) {
		if (i == 1) {
			ok_call(madvise(s.buf, slot, MADV_DONTNEED), "A drops its pages");
			/* What B's receive buffer held is not what the SEND brings. */
			memset(t.buf + slot + off, 0x5a, len);
		}
		if (i == 2)
			memcpy(s.buf + off, p6, len);
		rid = post_recv(p->b, NULL, &t, i * slot + off, len);
		r = a_op(p, IBV_WR_SEND, &s, off, len, 0, 0, 0, 0, &wc);
		rr = r == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid, &rwc) : -2;
		CHECK(r == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && rwc.byte_len == len &&
		      bytes_are(t.buf + i * slot + off, want[i], len, off),
		      "%s: send %s, receive %s, %s", what[i], st(r), st(rr), diff_msg);
		if (r != IBV_WC_SUCCESS || rr != IBV_WC_SUCCESS)
			renew(p, "fresh QPs after it");
	}

	r = read_from(p, &t, &d, off, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, off, p5, len), "a READ into A's ODP buffer: %s, %s",
	      st(r), diff_msg);
	ok_call(madvise(d.buf, slot, MADV_DONTNEED), "A drops its pages");
	{
		struct ibv_sge g = { .addr = at(&d, off), .length = len, .lkey = d.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = ++wrid, .sg_list = &g, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		/* From the third slot: p6. */
		wr.wr.rdma.remote_addr = at(&t, 2 * slot + off);
		wr.wr.rdma.rkey = t.mr->rkey;
		r = ibv_post_send(p->a, &wr, &bad) ? -1 : wait_wc(A.scq, wr.wr_id, &wc);
		if (r == IBV_WC_SUCCESS)
			moved_pages += len / page;
	}
	CHECK(r == IBV_WC_SUCCESS && holds(&d, off, p6, len),
	      "after that, a READ of other bytes lands in the dropped buffer: %s, %s", st(r),
	      diff_msg);
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&s);
	region_free(&t);
	region_free(&d);
	free(p5);
	free(p6);
}

/* kB of huge pages in the mapping that holds addr (smaps), or -1. */
static long anon_huge_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	uintptr_t a = (uintptr_t)addr;
	char line[512];
	long kb = -1;
	int in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2) {
			in = s <= a && a < e;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/* Transparent huge pages: 4 MiB, 2 MiB aligned. */
static void test_thp(struct pair *p)
{
	const size_t len = 4 * MiB, huge = 2 * MiB, hole = MiB, win = 64 * KiB;
	struct region t = { 0 }, s = { 0 }, d = { 0 };
	uint8_t *p7 = NULL, *p8 = NULL, *raw;
	char mode[128] = "", what[200];
	uintptr_t a;
	long kb;
	FILE *f;
	int r;

	f = fopen(THP_ENABLED, "r");
	if (!f) {
		printf("note: no %s: transparent huge pages not tested\n", THP_ENABLED);
		return;
	}
	if (!fgets(mode, sizeof(mode), f))
		mode[0] = 0;
	fclose(f);
	mode[strcspn(mode, "\n")] = 0;
	if (strstr(mode, "[never]")) {
		printf("note: transparent huge pages are off (%s): not tested\n", mode);
		return;
	}
	raw = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		CHECK(0, "mmap of %zu bytes%s", len + huge, why(1));
		return;
	}
	/* Keep only the aligned 4 MiB. */
	a = ((uintptr_t)raw + huge - 1) & ~(huge - 1);
	if (a > (uintptr_t)raw)
		munmap(raw, a - (uintptr_t)raw);
	munmap((void *)(a + len), (uintptr_t)raw + huge - a);
	t.buf = (uint8_t *)a;
	t.len = len;
	snprintf(what, sizeof(what), "4 MiB at a 2 MiB boundary, MADV_HUGEPAGE (THP %s)", mode);
	ok_call(madvise(t.buf, len, MADV_HUGEPAGE), what);
	p7 = pattern(len);
	p8 = pattern(page);
	if (region_reg(&B, &t) || region_new(&A, &s, len, 0) || region_new(&A, &d, len, 0))
		goto out;
	/* The second huge page faulted in by the CPU, the first by the device. */
	t.buf[huge + 5] = 1;
	memcpy(s.buf, p7, len);
	r = write_to(p, &s, &t, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, p7, len), "a WRITE of 4 MiB into it: %s, %s",
	      st(r), r == IBV_WC_SUCCESS ? diff_msg : "-");
	kb = anon_huge_kb(t.buf);
	if (kb > 0)
		printf("     (%ld kB of it in huge pages)\n", kb);
	else
		printf("note: no huge page backs the buffer (AnonHugePages %ld kB, THP %s)\n", kb,
		       mode);
	r = read_from(p, &t, &d, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, 0, p7, len),
	      "a READ of the 4 MiB into never-touched memory: %s, %s", st(r),
	      r == IBV_WC_SUCCESS ? diff_msg : "-");
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
	no_pins("with 12 MiB registered ODP and moved");

	/* Dropping one page splits its huge page; it reads back as zeros. */
	ok_call(madvise(t.buf + hole, page, MADV_DONTNEED),
		"B drops one page inside the first huge page");
	memset(p7 + hole, 0, page);
	memset(d.buf + hole - win / 2, 0x5a, win);
	r = read_from(p, &t, &d, hole - win / 2, win);
	CHECK(r == IBV_WC_SUCCESS && holds(&d, 0, p7, len),
	      "a READ of 64 KiB around it returns zeros for that page, the old bytes around it: %s, %s",
	      st(r), diff_msg);
	memcpy(s.buf + hole, p8, page);
	memcpy(p7 + hole, p8, page);
	r = write_to(p, &s, &t, hole, page);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, p7, len),
	      "a WRITE of new bytes into the dropped page lands: %s, %s", st(r), diff_msg);
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&t);
	region_free(&s);
	region_free(&d);
	free(p7);
	free(p8);
}

/* RC SENDs into SRQ receives in never-touched memory. */
static void test_srq(void)
{
	const uint32_t lens[2] = { 4096, 20000 };
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct region s = { 0 }, t = { 0 };
	struct pair q = { 0 };
	uint8_t *want[2] = { pattern(lens[0]), pattern(lens[1]) };
	const size_t base = aligned ? 0 : 100, off[2] = { base, base + 8192 };
	struct ibv_wc wc, rwc;
	uint64_t rid[2];
	int i, r, rr;

	q.srq = ibv_create_srq(B.pd, &si);
	CHECK(q.srq != NULL, "an SRQ at B%s", why(!q.srq));
	if (!q.srq)
		goto out;
	renew(&q, "RC QPs, B's receiving from the SRQ");
	if (!q.b || region_new(&A, &s, 32 * KiB, 0) || region_new(&B, &t, 32 * KiB, 0))
		goto out;
	for (i = 0; i < 2; i++)
		rid[i] = post_recv(NULL, q.srq, &t, off[i], lens[i]);
	for (i = 0; i < 2; i++) {
		memcpy(s.buf + off[i], want[i], lens[i]);
		r = a_op(&q, IBV_WR_SEND, &s, off[i], lens[i], 0, 0, 0, 0, &wc);
		rr = r == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid[i], &rwc) : -2;
		CHECK(r == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && rwc.byte_len == lens[i] &&
		      bytes_are(t.buf + off[i], want[i], lens[i], off[i]),
		      "RC SEND of %u bytes into a never-touched SRQ receive: send %s, receive %s, %s",
		      lens[i], st(r), st(rr), diff_msg);
	}
	CHECK(bytes_are(t.buf, NULL, off[0], 0) &&
	      bytes_are(t.buf + off[0] + lens[0], NULL, off[1] - off[0] - lens[0], off[0] + lens[0]) &&
	      bytes_are(t.buf + off[1] + lens[1], NULL, t.len - off[1] - lens[1], off[1] + lens[1]),
	      "nothing written around the receives: %s", diff_msg);
out:
	pair_free(&q);
	region_free(&s);
	region_free(&t);
	if (q.srq)
		CHECK(ibv_destroy_srq(q.srq) == 0, "the SRQ destroyed");
	free(want[0]);
	free(want[1]);
}

/* INIT -> RTR -> RTS with what UC takes (no timeout, retries, RNR timer or
 * READ/atomic depth). */
static int uc_connect(struct ibv_qp *qp, struct side *s, struct side *peer, uint32_t dest_qpn,
		      uint32_t sq_psn, uint32_t rq_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = path_mtu, .dest_qp_num = dest_qpn,
		.rq_psn = rq_psn,
		.ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = peer->gid, .sgid_index = s->gid_index, .hop_limit = 64 },
		},
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* UC SEND and WRITE with immediate from and into never-touched memory. */
static void test_uc(void)
{
	const uint32_t len = 64 * KiB;
	const size_t off = aligned ? 0 : 100;
	struct region s = { 0 }, t = { 0 }, r = { 0 };
	struct pair q = { 0 };
	uint8_t *want = pattern(len), *want2 = pattern(len);
	struct ibv_wc wc, rwc;
	uint64_t rid;
	int c, rc, rr;

	q.a = make_qp(&A, IBV_QPT_UC, NULL);
	q.b = make_qp(&B, IBV_QPT_UC, NULL);
	c = q.a && q.b && !uc_connect(q.a, &A, &B, q.b->qp_num, psn, psn + 0x777) &&
	    !uc_connect(q.b, &B, &A, q.a->qp_num, psn + 0x777, psn);
	psn += 0x10000;
	CHECK(c, "UC QPs connected");
	if (!c || region_new(&A, &s, span(off, len), 0) || region_new(&B, &t, span(off, len), 0) ||
	    region_new(&B, &r, span(off, len), 0))
		goto out;
	/* The SEND: B's receive buffer never touched, A's source only by the
	 * CPU (its MR has seen none of it). */
	memcpy(s.buf + off, want, len);
	rid = post_recv(q.b, NULL, &t, off, len);
	rc = a_op(&q, IBV_WR_SEND, &s, off, len, 0, 0, 0, 0, &wc);
	rr = rc == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid, &rwc) : -2;
	c = rc == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && rwc.byte_len == len &&
	    holds(&t, off, want, len);
	if (rxe_ref && !c)
		printf("note: rxe: UC SEND of 64 KiB into never-touched ODP memory: send %s, "
		       "receive %s\n", st(rc), st(rr));
	else
		CHECK(c, "UC SEND of 64 KiB into a never-touched receive buffer: send %s, receive %s, %s",
		      st(rc), st(rr), diff_msg);
	/* The WRITE with immediate into never-touched memory (a receive for
	 * the immediate, which says it arrived). */
	memcpy(s.buf + off, want2, len);
	rid = post_recv(q.b, NULL, &t, 0, 8);
	rc = a_op(&q, IBV_WR_RDMA_WRITE_WITH_IMM, &s, off, len, at(&r, off), r.mr->rkey, 0, 0, &wc);
	rr = rc == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid, &rwc) : -2;
	c = rc == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && holds(&r, off, want2, len);
	if (rxe_ref && !c)
		printf("note: rxe: UC WRITE with immediate into never-touched ODP memory: %s, %s\n",
		       st(rc), st(rr));
	else
		CHECK(c, "UC WRITE with immediate of 64 KiB into never-touched memory: %s, %s, %s",
		      st(rc), st(rr), diff_msg);
out:
	pair_free(&q);
	region_free(&s);
	region_free(&t);
	region_free(&r);
	free(want);
	free(want2);
}

/* UD SENDs into never-touched receive buffers. */
static void test_ud(void)
{
	const uint32_t lens[3] = { 8, 512, 1024 };
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = B.gid, .sgid_index = A.gid_index, .hop_limit = 64 },
	};
	struct region s = { 0 }, t = { 0 };
	struct ibv_qp *qa, *qb;
	struct ibv_ah *ah;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	uint8_t *want[3];
	int i, r, rr, ok = 1;

	qa = make_qp(&A, IBV_QPT_UD, NULL);
	qb = make_qp(&B, IBV_QPT_UD, NULL);
	ah = ibv_create_ah(A.pd, &aa);
	for (i = 0; i < 2; i++) {
		struct ibv_qp *qp = i ? qb : qa;

		a.qp_state = IBV_QPS_RTR;
		ok = ok && qp && !ibv_modify_qp(qp, &a, IBV_QP_STATE);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 1;
		ok = ok && !ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	CHECK(ok && ah, "UD QPs at A and B, an AH to B%s", why(!(ok && ah)));
	for (i = 0; i < 3; i++)
		want[i] = pattern(lens[i]);
	if (!ok || !ah || region_new(&A, &s, 4 * page, 0) || region_new(&B, &t, 7 * page, 0))
		goto out;
	for (i = 0; i < 3; i++) {
		/* Slot i at page 2i: the GRH in one page, the payload from the next
		 * page's last bytes on (aligned: from the next page's start). */
		size_t roff = (2 * i + 1) * page - GRH - (aligned ? 0 : 20);
		size_t soff = (i + 1) * page - (aligned ? 0 : 4);
		struct ibv_sge g = { .addr = at(&s, soff), .length = lens[i], .lkey = s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = ++wrid, .sg_list = &g, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		struct ibv_wc wc, rwc;
		uint64_t rid = post_recv(qb, NULL, &t, roff, GRH + 1024);

		memcpy(s.buf + soff, want[i], lens[i]);
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qb->qp_num;
		wr.wr.ud.remote_qkey = UD_QKEY;
		r = ibv_post_send(qa, &wr, &bad) ? -1 : wait_wc(A.scq, wr.wr_id, &wc);
		rr = r == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid, &rwc) : -2;
		if (r == IBV_WC_SUCCESS)
			moved_pages++;
		CHECK(r == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && rwc.byte_len == GRH + lens[i] &&
		      rwc.src_qp == qa->qp_num &&
		      bytes_are(t.buf + roff + GRH, want[i], lens[i], roff + GRH) &&
		      bytes_are(t.buf + roff + GRH + lens[i], NULL, 1024 - lens[i],
				roff + GRH + lens[i]),
		      "UD SEND of %u bytes into never-touched memory: %s, receive %s (%u B from %#x), %s",
		      lens[i], st(r), st(rr), rr == IBV_WC_SUCCESS ? rwc.byte_len : 0,
		      rr == IBV_WC_SUCCESS ? rwc.src_qp : 0, diff_msg);
	}
out:
	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
	if (ah)
		ibv_destroy_ah(ah);
	drain(A.scq);
	drain(B.rcq);
	region_free(&s);
	region_free(&t);
	for (i = 0; i < 3; i++)
		free(want[i]);
}

/* op on memory whose mapping is gone must fail (REM_ACCESS_ERR for the
 * remote accesses); fresh QPs after it. */
static void access_fails(struct pair *p, const char *what, enum ibv_wr_opcode op,
			 const struct region *l, const struct region *t, uint32_t len, int want)
{
	struct ibv_wc wc;
	int r;

	r = a_op(p, op, l, 0, len, at(t, 0), t->mr->rkey, 1, 1, &wc);
	CHECK(r > IBV_WC_SUCCESS, "%s fails: %s", what, st(r));
	CHECK_SROCE(r == want, "%s completes with %s: %s", what, ibv_wc_status_str(want), st(r));
	renew(p, "fresh QPs after it");
}

/* Memory that is not mapped under an ODP MR. */
static void test_errors(struct pair *p)
{
	const size_t len = 16 * page;
	struct region s = { 0 }, g = { 0 }, t = { 0 }, u = { 0 }, v = { 0 }, w = { 0 },
		      h = { 0 };
	uint8_t *want = pattern(len);
	struct ibv_wc wc, rwc;
	uint64_t rid;
	int r, rr, ret;

	/* Everything that maps memory before the holes are made. */
	if (region_new(&A, &s, len, 0) || region_new(&B, &g, len, 0) ||
	    region_new(&B, &t, len, 1) || region_new(&A, &u, len, 1) ||
	    region_new(&A, &v, len, 1) || region_new(&B, &w, len, 1))
		goto out;
	memcpy(s.buf, want, len);

	/* B's memory unmapped under its MR after the MR has been used. */
	r = write_to(p, &s, &t, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, want, len),
	      "a WRITE of 64 KiB into B's buffer: %s, %s", st(r), diff_msg);
	ok_call(region_unmap(&t), "B unmaps the buffer, leaving its MR");
	access_fails(p, "a WRITE into the unmapped buffer", IBV_WR_RDMA_WRITE, &s, &t, 4096,
		     IBV_WC_REM_ACCESS_ERR);
	access_fails(p, "a READ of the unmapped buffer", IBV_WR_RDMA_READ, &s, &t, 4096,
		     IBV_WC_REM_ACCESS_ERR);
	access_fails(p, "a FETCH_AND_ADD on the unmapped buffer", IBV_WR_ATOMIC_FETCH_AND_ADD, &s,
		     &t, 8, IBV_WC_REM_ACCESS_ERR);
	ret = ibv_dereg_mr(t.mr);
	t.mr = NULL;
	t.buf = NULL;
	CHECK(ret == 0, "its MR deregisters: %s", strerror(ret));

	/* A's SEND source unmapped after a SEND from it. */
	memcpy(u.buf, want, len);
	rid = post_recv(p->b, NULL, &g, 0, len);
	r = a_op(p, IBV_WR_SEND, &u, 0, len, 0, 0, 0, 0, &wc);
	rr = r == IBV_WC_SUCCESS ? wait_wc(B.rcq, rid, &rwc) : -2;
	CHECK(r == IBV_WC_SUCCESS && rr == IBV_WC_SUCCESS && holds(&g, 0, want, len),
	      "a SEND of 64 KiB from A's buffer: send %s, receive %s, %s", st(r), st(rr), diff_msg);
	ok_call(region_unmap(&u), "A unmaps the buffer, leaving its MR");
	post_recv(p->b, NULL, &g, 0, len);
	access_fails(p, "a SEND from the unmapped buffer", IBV_WR_SEND, &u, &g, 4096,
		     IBV_WC_LOC_PROT_ERR);

	/* A's READ destination unmapped. */
	ok_call(region_unmap(&v), "A unmaps another registered buffer");
	r = a_op(p, IBV_WR_RDMA_READ, &v, 0, 4096, at(&g, 0), g.mr->rkey, 0, 0, &wc);
	CHECK(r > IBV_WC_SUCCESS, "a READ into the unmapped buffer fails: %s", st(r));
	renew(p, "fresh QPs after it");

	/* B's receive buffer unmapped. */
	ok_call(region_unmap(&w), "B unmaps a registered receive buffer");
	rid = post_recv(p->b, NULL, &w, 0, len);
	r = a_op(p, IBV_WR_SEND, &s, 0, 4096, 0, 0, 0, 0, &wc);
	rr = wait_wc(B.rcq, rid, &rwc);
	CHECK(r > IBV_WC_SUCCESS && rr > IBV_WC_SUCCESS,
	      "a SEND into the unmapped receive buffer fails at both ends: send %s, receive %s",
	      st(r), st(rr));
	renew(p, "fresh QPs after it");
	ret = (u.mr ? ibv_dereg_mr(u.mr) : 0) | (v.mr ? ibv_dereg_mr(v.mr) : 0) |
	      (w.mr ? ibv_dereg_mr(w.mr) : 0);
	u.mr = v.mr = w.mr = NULL;
	u.buf = v.buf = w.buf = NULL;
	CHECK(ret == 0, "their MRs deregister");

	/* An ODP MR over a range never mapped while registered. */
	h.len = len;
	h.buf = mmap((void *)far_next, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	far_next += 64 * MiB;
	if (h.buf == MAP_FAILED || munmap(h.buf, len)) {
		CHECK(0, "a hole in the address space%s", why(1));
		h.buf = NULL;
		goto out;
	}
	errno = 0;
	h.mr = ibv_reg_mr(B.pd, h.buf, len, ODP_ACCESS);
	CHECK(1, "an ODP MR over an unmapped range: %s", h.mr ? "registered" : strerror(errno));
	if (h.mr) {
		void *m;

		r = write_to(p, &s, &h, 0, 4096);
		CHECK(r > IBV_WC_SUCCESS, "a WRITE into it fails: %s", st(r));
		CHECK_SROCE(r == IBV_WC_REM_ACCESS_ERR, "... with REM_ACCESS_ERR: %s", st(r));
		/* Map before fresh QPs: their rings must not land in the hole. */
		m = mmap(h.buf, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		CHECK(m == h.buf, "memory mapped there%s", why(m != h.buf));
		renew(p, "fresh QPs");
		if (m == h.buf) {
			r = write_to(p, &s, &h, 0, 4096);
			CHECK(r == IBV_WC_SUCCESS && holds(&h, 0, want, 4096),
			      "then a WRITE into it lands: %s, %s", st(r), diff_msg);
			if (r != IBV_WC_SUCCESS)
				renew(p, "fresh QPs after it");
		} else {
			h.buf = NULL;
		}
	} else {
		h.buf = NULL;
	}

	r = write_to(p, &s, &g, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&g, 0, want, len),
	      "after all that, a WRITE of 64 KiB into good memory: %s, %s", st(r), diff_msg);
	if (r != IBV_WC_SUCCESS)
		renew(p, "fresh QPs after it");
out:
	region_free(&s);
	region_free(&g);
	region_free(&t);
	region_free(&u);
	region_free(&v);
	region_free(&w);
	region_free(&h);
	free(want);
}

/* Exit with ODP MRs and QPs, freeing nothing. */
static int leave(void)
{
	const size_t len = 64 * KiB;
	struct region s = { 0 }, t = { 0 }, gone = { 0 };
	struct pair p = { 0 };
	uint8_t *want = pattern(len);
	int r;

	renew(&p, "RC QPs connected");
	if (!p.b || region_new(&A, &s, len, 0) || region_new(&B, &t, len, 0) ||
	    region_new(&B, &gone, len, 1))
		return 1;
	memcpy(s.buf, want, len);
	r = write_to(&p, &s, &t, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&t, 0, want, len), "a WRITE of 64 KiB: %s, %s", st(r),
	      diff_msg);
	r = write_to(&p, &s, &gone, 0, len);
	CHECK(r == IBV_WC_SUCCESS, "a WRITE of 64 KiB into another buffer: %s", st(r));
	memset(s.buf, 0, len);
	r = read_from(&p, &t, &s, 0, len);
	CHECK(r == IBV_WC_SUCCESS && holds(&s, 0, want, len), "a READ of it back: %s, %s", st(r),
	      diff_msg);
	ok_call(region_unmap(&gone), "that other buffer unmapped, its MR left");
	if (failures) {
		printf("%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed; exiting with ODP MRs registered and QPs connected, nothing freed\n");
	return 0;
}

static int usage(const char *prog)
{
	fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B [rxe] [aligned] [leave]\n", prog);
	return 2;
}

/* The port carries this run's path MTU. */
static int port_mtu_ok(struct side *s, const char *name)
{
	struct ibv_port_attr pa;
	int r = ibv_query_port(s->ctx, 1, &pa);

	CHECK(r == 0 && pa.active_mtu >= path_mtu, "%s: active MTU %d, path MTU %d%s", name,
	      r ? 0 : 128 << pa.active_mtu, 128 << path_mtu,
	      aligned ? " (aligned: the netdev needs MTU 4096 + headers)" : "");
	return r == 0 && pa.active_mtu >= path_mtu;
}

int main(int argc, char **argv)
{
	struct pair p = { 0 };
	const size_t sizes[3] = { 8, 4096, MiB };
	int i, ok, leaving = 0;

	if (argc < 5)
		return usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	page = sysconf(_SC_PAGESIZE);
	for (i = 5; i < argc; i++) {
		if (!strcmp(argv[i], "rxe"))
			rxe_ref = 1;
		else if (!strcmp(argv[i], "aligned"))
			aligned = 1;
		else if (!strcmp(argv[i], "leave"))
			leaving = 1;
		else
			return usage(argv[0]);
	}
	if (aligned)
		path_mtu = IBV_MTU_4096;
	pinned0 = sroce_pinned();
	acquired0 = pins_acquired();
	dev_b = argv[3];
	if (open_side(&A, argv[1], atoi(argv[2])) || open_side(&B, argv[3], atoi(argv[4]))) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		return 1;
	}
	ok = test_caps(&A, argv[1]);
	ok = test_caps(&B, argv[3]) && ok;
	if (!ok) {
		printf("%d checks failed (no ODP: nothing else tested)\n", failures);
		return 1;
	}
	ok = port_mtu_ok(&A, argv[1]);
	ok = port_mtu_ok(&B, argv[3]) && ok;
	if (!ok)
		return 1;
	if (leaving)
		return leave();

	test_register();
	renew(&p, aligned ? "RC QPs connected (path MTU 4096; A requests, B owns the target memory)"
			  : "RC QPs connected (path MTU 1024; A requests, B owns the target memory)");
	if (!p.b)
		return 1;
	for (i = 0; i < 3; i++) {
		test_send(&p, sizes[i]);
		test_write(&p, sizes[i]);
		test_read(&p, sizes[i]);
	}
	test_atomics(&p);
	test_advise(&p);
	test_implicit(&p);
	test_dontneed(&p);
	test_remap(&p);
	test_local(&p);
	test_thp(&p);
	test_srq();
	test_uc();
	test_ud();
	test_errors(&p);
	no_pins("at the end");

	/* Teardown: the PDs deallocate only if nothing is left in them. */
	pair_free(&p);
	ok = !ibv_dealloc_pd(B.pd) && !ibv_dealloc_pd(A.pd);
	ok = ok && !ibv_destroy_cq(A.scq) && !ibv_destroy_cq(A.rcq) && !ibv_destroy_cq(B.scq) &&
	     !ibv_destroy_cq(B.rcq);
	ok = ok && !ibv_close_device(A.ctx) && !ibv_close_device(B.ctx);
	CHECK(ok, "everything destroyed: QPs, MRs, PDs, CQs, devices%s", why(!ok));
	if (failures) {
		printf("%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
