// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_mw DEV_A GID_A DEV_B GID_B [rxe]: memory windows, types 1 and 2B,
 * over RC QPs between A (the peer, which requests) and B (the target, which
 * owns a 64 KiB buffer registered with LOCAL_WRITE, the remote rights and
 * MW_BIND, and binds windows on it):
 *   - B's device reports MEM_WINDOW, MEM_WINDOW_TYPE_2B and max_mw > 0;
 *   - type 1: ibv_bind_mw (a BIND_MW completion, the rkey moved to its next
 *     key variant); WRITE, READ, compare-and-swap and fetch-and-add through
 *     the window (also through QPs other than the one that bound it); an
 *     access crossing or just outside the window's bounds, a WRITE or an
 *     atomic through a READ-only window, the rkey a re-bind replaced, the
 *     re-bound window's old range and bogus rkeys fail with REM_ACCESS_ERR
 *     and change nothing;
 *   - a bind to an MR registered without MW_BIND completes with
 *     MW_BIND_ERR; a zero-based type 1 bind is refused (EINVAL) by the
 *     library; ibv_dereg_mr of an MR with a bound window fails (EBUSY;
 *     rxe: EINVAL), the MR still serves the window, and once the window is
 *     deallocated its rkey fails and the MR deregisters;
 *   - type 2: a bind work request (ibv_post_send IBV_WR_BIND_MW, new key
 *     from ibv_inc_rkey); WRITE, READ, fetch-and-add through the QP it is
 *     bound to; the same rkey through another QP pair between the same PDs
 *     fails; binding it again while bound gives MW_BIND_ERR;
 *   - type 2 invalidation: local (IBV_WR_LOCAL_INV, a LOCAL_INV completion)
 *     and remote (a SEND_WITH_INV through another QP pair is refused with
 *     REM_INV_REQ_ERR, sroce only; through the bound QP's pair the receive
 *     completion carries
 *     IBV_WC_WITH_INV and the rkey); each makes the rkey fail; a re-bind
 *     with the next key variant works again;
 *   - type 2 through the extended QP API (ibv_wr_bind_mw, ibv_wr_local_inv);
 *     a window deallocated while bound stops working;
 *   - a zero-based type 2 window: remote address 0x100 lands at the
 *     window's start + 0x100, address 8192 (its length) fails;
 *   - everything is destroyed cleanly (the PDs deallocate: nothing left).
 * Every access checks B's whole buffer against what it should hold, so a
 * refused access that wrote anything, or an access that wrote outside its
 * range, fails.
 *
 * "rxe" (the reference run against the kernel's rxe): the checks only sroce
 * is held to print "note: rxe differs: ..." instead of failing: a window's
 * bounds (rxe enforces only its MR's), MW_BIND_ERR as a failed bind's
 * status (rxe moves the QP to ERR first and completes the bind as
 * WR_FLUSH_ERR; the program still requires an error), and IBV_WC_WITH_INV
 * in the flags of a receive that invalidated (rxe sets the kernel's
 * IB_WC_WITH_INVALIDATE, bit 2, which libibverbs reads as
 * IBV_WC_IP_CSUM_OK).
 *
 * verbs_mw DEV_A GID_A DEV_B GID_B leave [mw-first]: binds a type 1 and a
 * type 2 window, uses each once and exits without freeing anything (the
 * caller checks that nothing stays pinned or referenced). "mw-first"
 * allocates the type 2 window before its QP, so that closing the device
 * file destroys the QP before the window still bound to it (rxe cannot do
 * that: its QP waits for the window's reference, then warns).
 *
 * One line per check; "all checks passed" and exit 0 only if all passed.
 */
#include <inttypes.h>
#include "common.h"

#define BUF_SIZE (64 * 1024)
#define TIMEOUT_MS 10000

/* Where the windows lie in B's buffer (offsets). */
#define W1 4096		/* type 1, [W1, W1 + W1_LEN) */
#define W1_LEN 8192
#define RO 16384	/* type 1, READ only, 4 KiB */
#define RB 20480	/* the type 1 window re-bound, 4 KiB */
#define T2 24576	/* type 2, 8 KiB */
#define T3 32768	/* type 2, invalidated, 4 KiB */
#define T4 36864	/* type 2, extended API, 4 KiB */
#define ZB 4096		/* zero-based type 2, 8 KiB */
#define M2 49152	/* a second MR, 8 KiB, its window the first 4 KiB */
#define RECV 61440	/* a receive buffer, 256 bytes */

#define RW_ALL (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	int gid_index;
	union ibv_gid gid;
	uint8_t *buf;
	struct ibv_mr *mr;
};

/* An RC QP of A's connected to one of B's (B's made with the extended API
 * when bx is set). */
struct pair {
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *bx;
};

static struct side A, B;
/* B registered again without MW_BIND. */
static struct ibv_mr *b_nobind;
/* What B's buffer must hold. */
static uint8_t shadow[BUF_SIZE];
static int rxe_ref;
static uint32_t psn = 0x1000;
static uint64_t wrid;

/* A check only sroce is held to: under "rxe", a failure is a note. */
#define CHECK_SROCE(cond, ...) CHECK_OR_NOTE(rxe_ref, cond, __VA_ARGS__)

static const char *st(int r)
{
	static char s[64];

	if (r == -1)
		return "post failed";
	if (r == -2)
		return "no completion";
	if (r == -3)
		return "completion of another work request";
	snprintf(s, sizeof(s), "%s", ibv_wc_status_str(r));
	return s;
}

/* B's buffer holds what it must; else says where it first differs and
 * takes what it holds as the new reference (one failure, not a cascade). */
static char diff_msg[96];
static int b_intact(void)
{
	size_t i;

	for (i = 0; i < BUF_SIZE; i++)
		if (B.buf[i] != shadow[i])
			break;
	if (i == BUF_SIZE) {
		snprintf(diff_msg, sizeof(diff_msg), "target buffer as expected");
		return 1;
	}
	snprintf(diff_msg, sizeof(diff_msg), "target buffer differs first at offset %zu", i);
	memcpy(shadow, B.buf, BUF_SIZE);
	return 0;
}

static int open_side(struct side *s, const char *dev, int gid_index, int access)
{
	s->gid_index = gid_index;
	if (open_port(dev, gid_index, 64, &s->ctx, &s->gid, &s->pd, &s->scq, &s->rcq))
		return -1;
	if (posix_memalign((void **)&s->buf, 4096, BUF_SIZE))
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, access);
	return s->mr ? 0 : -1;
}

static struct ibv_qp *make_qp(struct side *s, int ext)
{
	struct ibv_qp_init_attr_ex init = {
		.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = s->pd,
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | RW_ALL,
	};
	struct ibv_qp *qp;

	if (ext) {
		init.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		init.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
				      IBV_QP_EX_WITH_LOCAL_INV;
		qp = ibv_create_qp_ex(s->ctx, &init);
	} else {
		struct ibv_qp_init_attr ia = {
			.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = IBV_QPT_RC,
			.cap = init.cap,
		};
		qp = ibv_create_qp(s->pd, &ia);
	}
	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS)) {
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
	p->bx = NULL;
	drain(A.scq);
	drain(A.rcq);
	drain(B.scq);
	drain(B.rcq);
}

/* Fresh, connected QPs (after an error completion both are in ERR). A
 * window of type 2 bound to p->b must be gone first: rxe's QP waits for the
 * window's reference when destroyed. */
static int pair_new(struct pair *p, int ext)
{
	uint32_t pa = psn, pb = psn + 0x777;

	psn += 0x10000;
	pair_free(p);
	p->a = make_qp(&A, 0);
	p->b = make_qp(&B, ext);
	if (!p->a || !p->b)
		return -1;
	if (ext && !(p->bx = ibv_qp_to_qp_ex(p->b)))
		return -1;
	return rc_connect(p->a, A.gid_index, &B.gid, p->b->qp_num, pa, pb, 4) ||
	       rc_connect(p->b, B.gid_index, &A.gid, p->a->qp_num, pb, pa, 4) ? -1 : 0;
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

/* pair_new, as a check. */
static void renew(struct pair *p, int ext, const char *what)
{
	int r = pair_new(p, ext);

	CHECK(r == 0, "%s%s", what, why(r));
}

/* The next completion on cq: its status if it is wr_id's, else < 0. */
static int wait_wc(struct ibv_cq *cq, uint64_t id, struct ibv_wc *wc)
{
	return wait_wc_of(cq, id, wc, TIMEOUT_MS);
}

/*
 * A posts op on p->a: RDMA WRITE/READ (len bytes at A's buf + a_off and
 * B's address raddr), an atomic (8 bytes back at A's buf + a_off), or
 * SEND_WITH_INV (len bytes, invalidating rkey). Its completion's status.
 */
static int peer_op(struct pair *p, enum ibv_wr_opcode op, size_t a_off, uint32_t len,
		   uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		   struct ibv_wc *wc)
{
	struct ibv_sge g = { .addr = (uintptr_t)(A.buf + a_off), .length = len,
			     .lkey = A.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = ++wrid, .sg_list = &g, .num_sge = 1,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;

	switch (op) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		g.length = 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
		break;
	case IBV_WR_SEND_WITH_INV:
		wr.invalidate_rkey = rkey;
		break;
	default:
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(p->a, &wr, &bad))
		return -1;
	return wait_wc(A.scq, wr.wr_id, wc);
}

/* B's address at offset off. */
static uint64_t baddr(size_t off)
{
	return (uintptr_t)(B.buf + off);
}

/* len bytes of A's at a_off, seeded, each different from what B holds at
 * b_off (so that a stray write shows). */
static void a_fill(size_t a_off, size_t len, size_t b_off, unsigned int seed)
{
	size_t i;

	fill(A.buf + a_off, len, seed);
	for (i = 0; i < len && b_off + i < BUF_SIZE; i++)
		if (A.buf[a_off + i] == B.buf[b_off + i])
			A.buf[a_off + i] ^= 0xff;
}

/* A WRITE through rkey of len bytes at raddr that must land at B's offset
 * dst. */
static void write_ok(struct pair *p, const char *what, uint64_t raddr, uint32_t rkey,
		     size_t dst, uint32_t len)
{
	struct ibv_wc wc;
	int r;

	a_fill(0, len, dst, (unsigned int)(wrid + len));
	r = peer_op(p, IBV_WR_RDMA_WRITE, 0, len, raddr, rkey, 0, 0, &wc);
	memcpy(shadow + dst, A.buf, len);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE && b_intact(),
	      "%s: WRITE of %u bytes: %s, %s", what, len, st(r), diff_msg);
}

/* A READ through rkey of len bytes at raddr that must return B's bytes at
 * offset src. */
static void read_ok(struct pair *p, const char *what, uint64_t raddr, uint32_t rkey,
		    size_t src, uint32_t len)
{
	struct ibv_wc wc;
	int r;

	memset(A.buf + 32768, 0, len);
	r = peer_op(p, IBV_WR_RDMA_READ, 32768, len, raddr, rkey, 0, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == len &&
	      !memcmp(A.buf + 32768, B.buf + src, len) && b_intact(),
	      "%s: READ of %u bytes returns the window's bytes: %s", what, len, st(r));
}

/*
 * op through rkey at raddr (len bytes, B's offset near; a FETCH_AND_ADD
 * adds 1) must fail with REM_ACCESS_ERR and change nothing of B's; then a
 * fresh pair (ext as given; none if ext < 0). sroce_only: a check only
 * sroce is held to.
 */
static void access_fails(struct pair *p, int ext, int sroce_only, const char *what,
			 enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey, size_t near,
			 uint32_t len)
{
	struct ibv_wc wc;
	int r, intact;

	a_fill(0, len, near, (unsigned int)(wrid * 7));
	r = peer_op(p, op, 0, len, raddr, rkey, 1, 1, &wc);
	intact = b_intact();
	if (sroce_only) {
		CHECK_SROCE(r == IBV_WC_REM_ACCESS_ERR && intact,
			    "%s fails with REM_ACCESS_ERR and changes nothing: %s, %s",
			    what, st(r), diff_msg);
	} else {
		CHECK(r == IBV_WC_REM_ACCESS_ERR && intact,
		      "%s fails with REM_ACCESS_ERR and changes nothing: %s, %s",
		      what, st(r), diff_msg);
	}
	if (ext >= 0)
		renew(p, ext, "fresh QPs after it");
}

/* ibv_bind_mw (type 1) on qp: the completion's status, -1 if the call
 * failed (*ret: what it returned). */
static int bind1(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, size_t off,
		 uint64_t len, unsigned int access, struct ibv_wc *wc, int *ret)
{
	struct ibv_mw_bind b = {
		.wr_id = ++wrid, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = baddr(off), .length = len,
			       .mw_access_flags = access },
	};

	*ret = ibv_bind_mw(qp, mw, &b);
	if (*ret)
		return -1;
	return wait_wc(B.scq, b.wr_id, wc);
}

/* A type 2 bind work request on qp giving the window rkey. */
static int bind2(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey, size_t off,
		 uint64_t len, unsigned int access, struct ibv_wc *wc)
{
	struct ibv_send_wr wr = { .wr_id = ++wrid, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = B.mr, .addr = baddr(off), .length = len, .mw_access_flags = access,
	};
	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	return wait_wc(B.scq, wr.wr_id, wc);
}

/* The same through the extended QP API. */
static int bind2_ex(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey, size_t off,
		    uint64_t len, unsigned int access, struct ibv_wc *wc)
{
	struct ibv_mw_bind_info info = {
		.mr = B.mr, .addr = baddr(off), .length = len, .mw_access_flags = access,
	};

	ibv_wr_start(x);
	x->wr_id = ++wrid;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, mw, rkey, &info);
	if (ibv_wr_complete(x))
		return -1;
	return wait_wc(B.scq, wrid, wc);
}

static int local_inv(struct ibv_qp *qp, uint32_t rkey, struct ibv_wc *wc)
{
	struct ibv_send_wr wr = { .wr_id = ++wrid, .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.invalidate_rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	return wait_wc(B.scq, wr.wr_id, wc);
}

static void test_caps(void)
{
	struct ibv_device_attr da;
	int r = ibv_query_device(B.ctx, &da);

	CHECK(r == 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && da.max_mw > 0,
	      "B's device: MEM_WINDOW %d, MEM_WINDOW_TYPE_2B %d, max_mw %d",
	      !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW),
	      !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B), r ? -1 : da.max_mw);
}

/* An atomic through rkey on B's 8 bytes at off: returns old, leaves new. */
static void atomic_ok(struct pair *p, const char *what, enum ibv_wr_opcode op, size_t off,
		      uint32_t rkey, uint64_t cmp_add, uint64_t swap, uint64_t old, uint64_t new)
{
	struct ibv_wc wc;
	uint64_t got;
	int r;

	memset(A.buf + 48000, 0xee, 8);
	r = peer_op(p, op, 48000, 8, baddr(off), rkey, cmp_add, swap, &wc);
	memcpy(&got, A.buf + 48000, 8);
	memcpy(shadow + off, &new, 8);
	CHECK(r == IBV_WC_SUCCESS &&
	      (int)wc.opcode == (op == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD) &&
	      got == old && b_intact(),
	      "%s: %s, returned %" PRIu64 " (want %" PRIu64 "), %s", what, st(r), got, old,
	      diff_msg);
}

/* Type 1: bind, data through it, the accesses it refuses, a re-bind. */
static struct ibv_mw *test_type1(struct pair *p, struct ibv_mw **ro_out)
{
	const uint64_t hundred = 100;
	struct ibv_mw *mw, *ro;
	struct ibv_wc wc;
	uint32_t k0, k1;
	int r, ret;

	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	CHECK(mw && mw->type == IBV_MW_TYPE_1, "type 1 window allocated (rkey %#x)%s",
	      mw ? mw->rkey : 0, why(!mw));
	if (!mw)
		return NULL;
	k0 = mw->rkey;
	r = bind1(p->b, mw, B.mr, W1, W1_LEN, RW_ALL, &wc, &ret);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "ibv_bind_mw over buf+[%d, %d), READ|WRITE|ATOMIC: returned %d, %s, opcode %d",
	      W1, W1 + W1_LEN, ret, st(r), wc.opcode);
	CHECK(mw->rkey == ibv_inc_rkey(k0), "its rkey went %#x -> %#x (the next key variant)",
	      k0, mw->rkey);

	write_ok(p, "type 1", baddr(W1 + 100), mw->rkey, W1 + 100, 3000);
	write_ok(p, "type 1, the whole window", baddr(W1), mw->rkey, W1, W1_LEN);
	read_ok(p, "type 1, the whole window", baddr(W1), mw->rkey, W1, W1_LEN);
	read_ok(p, "type 1, its last byte", baddr(W1 + W1_LEN - 1), mw->rkey, W1 + W1_LEN - 1, 1);
	memcpy(B.buf + W1 + W1_LEN - 8, &hundred, 8);
	memcpy(shadow + W1 + W1_LEN - 8, &hundred, 8);
	atomic_ok(p, "type 1, CMP_AND_SWP 100 -> 555 on its last 8 bytes",
		  IBV_WR_ATOMIC_CMP_AND_SWP, W1 + W1_LEN - 8, mw->rkey, 100, 555, 100, 555);
	atomic_ok(p, "type 1, FETCH_AND_ADD 45", IBV_WR_ATOMIC_FETCH_AND_ADD, W1 + W1_LEN - 8,
		  mw->rkey, 45, 0, 555, 600);
	atomic_ok(p, "type 1, CMP_AND_SWP 1 -> 7 (no match, no swap)", IBV_WR_ATOMIC_CMP_AND_SWP,
		  W1 + W1_LEN - 8, mw->rkey, 1, 7, 600, 600);

	/* Out of the window's bounds, inside the MR's. */
	access_fails(p, 0, 1, "type 1: a WRITE of 8 bytes of which the last is past the window",
		     IBV_WR_RDMA_WRITE, baddr(W1 + W1_LEN - 7), mw->rkey, W1 + W1_LEN - 7, 8);
	access_fails(p, 0, 1, "type 1: a WRITE of 1 byte just past the window",
		     IBV_WR_RDMA_WRITE, baddr(W1 + W1_LEN), mw->rkey, W1 + W1_LEN, 1);
	access_fails(p, 0, 1, "type 1: a READ of 1 byte just before the window",
		     IBV_WR_RDMA_READ, baddr(W1 - 1), mw->rkey, W1 - 1, 1);
	access_fails(p, 0, 1, "type 1: a FETCH_AND_ADD just past the window",
		     IBV_WR_ATOMIC_FETCH_AND_ADD, baddr(W1 + W1_LEN), mw->rkey, W1 + W1_LEN, 8);
	write_ok(p, "type 1, through QPs other than the binding one", baddr(W1), mw->rkey, W1, 64);

	/* A READ-only window. */
	ro = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	CHECK(ro != NULL, "a second type 1 window allocated");
	*ro_out = ro;
	if (ro) {
		r = bind1(p->b, ro, B.mr, RO, 4096, IBV_ACCESS_REMOTE_READ, &wc, &ret);
		CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
		      "bound READ-only over buf+[%d, %d): %s", RO, RO + 4096, st(r));
		read_ok(p, "READ-only type 1", baddr(RO), ro->rkey, RO, 4096);
		access_fails(p, 0, 0, "a WRITE through the READ-only window",
			     IBV_WR_RDMA_WRITE, baddr(RO + 16), ro->rkey, RO + 16, 16);
		access_fails(p, 0, 0, "a FETCH_AND_ADD through the READ-only window",
			     IBV_WR_ATOMIC_FETCH_AND_ADD, baddr(RO + 64), ro->rkey, RO + 64, 8);
	}

	/* Re-binding moves the window and replaces its rkey. */
	k1 = mw->rkey;
	r = bind1(p->b, mw, B.mr, RB, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
		  &wc, &ret);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && mw->rkey == ibv_inc_rkey(k1),
	      "type 1 re-bound over buf+[%d, %d): %s, rkey %#x -> %#x", RB, RB + 4096, st(r), k1,
	      mw->rkey);
	write_ok(p, "the re-bound window", baddr(RB + 8), mw->rkey, RB + 8, 4088);
	access_fails(p, 0, 0, "a WRITE with the rkey the re-bind replaced",
		     IBV_WR_RDMA_WRITE, baddr(W1), k1, W1, 64);
	access_fails(p, 0, 1, "a WRITE at the re-bound window's old range",
		     IBV_WR_RDMA_WRITE, baddr(W1), mw->rkey, W1, 64);
	access_fails(p, 0, 0, "a WRITE with the window's rkey ^ 0x80",
		     IBV_WR_RDMA_WRITE, baddr(RB), mw->rkey ^ 0x80, RB, 64);
	access_fails(p, 0, 0, "a WRITE with rkey 0x7fffff00",
		     IBV_WR_RDMA_WRITE, baddr(RB), 0x7fffff00, RB, 64);
	write_ok(p, "the re-bound window, after all that", baddr(RB), mw->rkey, RB, 64);
	return mw;
}

/*
 * A bind work request's completion r must be an error, MW_BIND_ERR (rxe
 * moves the QP to ERR before it completes the failed request, which then
 * completes as flushed: WR_FLUSH_ERR).
 */
static void bind_failed(const char *what, int r)
{
	CHECK(r > IBV_WC_SUCCESS, "%s fails: %s", what, st(r));
	CHECK_SROCE(r == IBV_WC_MW_BIND_ERR, "%s completes with MW_BIND_ERR: %s", what, st(r));
}

/* Binds the library or the device refuses; deregistering a bound MR. */
static void test_bind_errors(struct pair *p)
{
	struct ibv_mw *mw;
	struct ibv_mr *mr2;
	struct ibv_wc wc;
	uint32_t k;
	int r, ret, e;

	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	CHECK(mw != NULL, "another type 1 window allocated");
	if (!mw)
		return;
	k = mw->rkey;
	r = bind1(p->b, mw, b_nobind, W1, 4096, IBV_ACCESS_REMOTE_WRITE, &wc, &ret);
	bind_failed("a bind to an MR registered without MW_BIND", r);
	/* rdma-core's rxe library set the next key before the bind failed:
	 * the caller undoes that. */
	mw->rkey = k;
	renew(p, 0, "fresh QPs after it");
	access_fails(p, 0, 0, "a WRITE with the key the failed bind would have given",
		     IBV_WR_RDMA_WRITE, baddr(W1), ibv_inc_rkey(k), W1, 16);

	r = bind1(p->b, mw, B.mr, W1, 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED,
		  &wc, &ret);
	CHECK(r == -1 && ret == EINVAL && mw->rkey == k && ibv_poll_cq(B.scq, 1, &wc) == 0,
	      "a zero-based type 1 bind is refused: ibv_bind_mw returned %d (%s), rkey %#x",
	      ret, strerror(ret), mw->rkey);
	r = bind1(p->b, mw, B.mr, W1, 4096, IBV_ACCESS_REMOTE_WRITE, &wc, &ret);
	CHECK(r == IBV_WC_SUCCESS && mw->rkey == ibv_inc_rkey(k),
	      "after it, the window binds: %s", st(r));
	write_ok(p, "that window", baddr(W1 + 4000), mw->rkey, W1 + 4000, 96);
	CHECK(ibv_dealloc_mw(mw) == 0, "the window deallocated while bound");

	/* Deregistering an MR with a window bound. */
	mr2 = ibv_reg_mr(B.pd, B.buf + M2, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	CHECK(mr2 && mw, "an MR over buf+[%d, %d) and a type 1 window", M2, M2 + 8192);
	if (!mr2 || !mw)
		return;
	r = bind1(p->b, mw, mr2, M2, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
		  &wc, &ret);
	CHECK(r == IBV_WC_SUCCESS, "the window bound to that MR: %s", st(r));
	errno = 0;
	ret = ibv_dereg_mr(mr2);
	e = errno;
	CHECK(ret != 0 && (ret == EINVAL || ret == EBUSY || e == EINVAL || e == EBUSY),
	      "ibv_dereg_mr of the MR with the window bound fails: returned %d, errno %d (%s)",
	      ret, e, strerror(e));
	CHECK_SROCE(ret == EBUSY || e == EBUSY, "... with EBUSY (rxe: EINVAL)");
	if (ret == 0)
		return;
	write_ok(p, "the window on the MR that is still registered", baddr(M2 + 10), mw->rkey,
		 M2 + 10, 1000);
	k = mw->rkey;
	CHECK(ibv_dealloc_mw(mw) == 0, "the window deallocated");
	access_fails(p, 0, 0, "a WRITE with the deallocated window's rkey",
		     IBV_WR_RDMA_WRITE, baddr(M2 + 10), k, M2 + 10, 16);
	ret = ibv_dereg_mr(mr2);
	CHECK(ret == 0, "then the MR deregisters: returned %d", ret);
}

/* Type 2: bound to one QP. */
static void test_type2(struct pair *p)
{
	struct pair q = { 0 };
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t k;
	int r;

	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	CHECK(mw && mw->type == IBV_MW_TYPE_2, "type 2 window allocated (rkey %#x)%s",
	      mw ? mw->rkey : 0, why(!mw));
	if (!mw)
		return;
	k = ibv_inc_rkey(mw->rkey);
	r = bind2(p->b, mw, k, T2, 8192, RW_ALL, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "IBV_WR_BIND_MW over buf+[%d, %d) with rkey %#x: %s, opcode %d", T2, T2 + 8192, k,
	      st(r), wc.opcode);
	/* ibv_post_send leaves the window's rkey to its caller. */
	mw->rkey = k;
	write_ok(p, "type 2", baddr(T2 + 1000), k, T2 + 1000, 5000);
	read_ok(p, "type 2", baddr(T2), k, T2, 8192);
	memset(B.buf + T2 + 8, 0, 8);
	memset(shadow + T2 + 8, 0, 8);
	atomic_ok(p, "type 2, FETCH_AND_ADD 9", IBV_WR_ATOMIC_FETCH_AND_ADD, T2 + 8, k, 9, 0, 0, 9);

	renew(&q, 0, "a second QP pair between the same PDs");
	access_fails(&q, 0, 0, "type 2: a WRITE through a QP it is not bound to",
		     IBV_WR_RDMA_WRITE, baddr(T2 + 100), k, T2 + 100, 100);
	pair_free(&q);
	write_ok(p, "type 2, through its QP again", baddr(T2 + 100), k, T2 + 100, 100);

	r = bind2(p->b, mw, ibv_inc_rkey(k), T2, 4096, IBV_ACCESS_REMOTE_WRITE, &wc);
	bind_failed("binding the bound type 2 window again", r);
	CHECK(ibv_dealloc_mw(mw) == 0, "the window deallocated");
	renew(p, 0, "fresh QPs");
}

/* Type 2: local and remote invalidation. */
static void test_type2_inv(struct pair *p)
{
	struct ibv_recv_wr rwr = { .wr_id = ++wrid, .num_sge = 1 }, *rbad;
	struct ibv_sge rg = { .addr = baddr(RECV), .length = 256, .lkey = B.mr->lkey };
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t k, k2;
	int r;

	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	CHECK(mw != NULL, "another type 2 window allocated");
	if (!mw)
		return;
	k = ibv_inc_rkey(mw->rkey);
	r = bind2(p->b, mw, k, T3, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, &wc);
	CHECK(r == IBV_WC_SUCCESS, "bound over buf+[%d, %d): %s", T3, T3 + 4096, st(r));
	mw->rkey = k;
	write_ok(p, "type 2", baddr(T3), k, T3, 4096);
	r = local_inv(p->b, k, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV,
	      "IBV_WR_LOCAL_INV of its rkey: %s, opcode %d", st(r), wc.opcode);
	access_fails(p, 0, 0, "a WRITE after the local invalidation",
		     IBV_WR_RDMA_WRITE, baddr(T3), k, T3, 64);

	k2 = ibv_inc_rkey(k);
	r = bind2(p->b, mw, k2, T3, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "bound again with the next key %#x: %s", k2, st(r));
	mw->rkey = k2;
	write_ok(p, "the re-bound type 2 window", baddr(T3 + 200), k2, T3 + 200, 2000);

	/* A peer invalidates a type 2 window only through the QP it is bound
	 * to (IBTA's type 2B; rxe takes it from any QP of the PD): through
	 * another pair the SEND is refused with an Invalid Request NAK. */
	if (!rxe_ref) {
		struct ibv_recv_wr qr = { .wr_id = ++wrid, .sg_list = &rg, .num_sge = 1 };
		struct pair q = { 0 };

		CHECK(pair_new(&q, 0) == 0 && ibv_post_recv(q.b, &qr, &rbad) == 0,
		      "a second QP pair between the same PDs, a receive posted on it");
		a_fill(0, 32, RECV, 98);
		r = peer_op(&q, IBV_WR_SEND_WITH_INV, 0, 32, 0, k2, 0, 0, &wc);
		CHECK(r == IBV_WC_REM_INV_REQ_ERR,
		      "SEND_WITH_INV of the window's rkey through the other pair: %s", st(r));
		/* The message's bytes were placed before its invalidation failed. */
		memcpy(shadow + RECV, A.buf, 32);
		pair_free(&q);
		write_ok(p, "the window after that refused invalidation", baddr(T3 + 300), k2,
			 T3 + 300, 100);
	}

	rwr.sg_list = &rg;
	CHECK(ibv_post_recv(p->b, &rwr, &rbad) == 0, "a receive posted at B");
	a_fill(0, 32, RECV, 99);
	r = peer_op(p, IBV_WR_SEND_WITH_INV, 0, 32, 0, k2, 0, 0, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
	      "SEND_WITH_INV of the window's rkey completed at A: %s", st(r));
	r = wait_wc(B.rcq, rwr.wr_id, &wc);
	memcpy(shadow + RECV, A.buf, 32);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.invalidated_rkey == k2 &&
	      wc.byte_len == 32 && b_intact(),
	      "B's receive: %s, opcode %d, invalidated rkey %#x (want %#x), %u bytes, %s",
	      st(r), wc.opcode, wc.invalidated_rkey, k2, wc.byte_len, diff_msg);
	/* rxe writes the kernel's IB_WC_WITH_INVALIDATE (bit 2) into the ring,
	 * which libibverbs reads as IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV is bit 3. */
	CHECK_SROCE(r == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
		    !(wc.wc_flags & IBV_WC_IP_CSUM_OK),
		    "B's receive has IBV_WC_WITH_INV (%#x) in its flags, not IBV_WC_IP_CSUM_OK (%#x): flags %#x",
		    IBV_WC_WITH_INV, IBV_WC_IP_CSUM_OK, wc.wc_flags);
	access_fails(p, 0, 0, "a WRITE after the remote invalidation",
		     IBV_WR_RDMA_WRITE, baddr(T3), k2, T3, 64);
	CHECK(ibv_dealloc_mw(mw) == 0, "the window deallocated");
}

/* Type 2 through the extended QP API. */
static void test_type2_ex(struct pair *p)
{
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t k;
	int r;

	renew(p, 1, "B's QP made with ibv_create_qp_ex (BIND_MW, LOCAL_INV)");
	if (!p->bx)
		return;
	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	CHECK(mw != NULL, "another type 2 window allocated");
	if (!mw)
		return;
	k = ibv_inc_rkey(mw->rkey);
	r = bind2_ex(p->bx, mw, k, T4, 4096, RW_ALL, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "ibv_wr_bind_mw over buf+[%d, %d): %s, opcode %d", T4, T4 + 4096, st(r), wc.opcode);
	mw->rkey = k;
	write_ok(p, "type 2 bound by ibv_wr_bind_mw", baddr(T4 + 4), k, T4 + 4, 4000);
	read_ok(p, "type 2 bound by ibv_wr_bind_mw", baddr(T4), k, T4, 4096);
	ibv_wr_start(p->bx);
	p->bx->wr_id = ++wrid;
	p->bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(p->bx, k);
	r = ibv_wr_complete(p->bx) ? -1 : wait_wc(B.scq, wrid, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV,
	      "ibv_wr_local_inv: %s, opcode %d", st(r), wc.opcode);
	access_fails(p, 1, 0, "a WRITE after ibv_wr_local_inv",
		     IBV_WR_RDMA_WRITE, baddr(T4), k, T4, 64);

	k = ibv_inc_rkey(k);
	r = bind2_ex(p->bx, mw, k, T4, 4096, RW_ALL, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "ibv_wr_bind_mw again with the next key %#x: %s", k, st(r));
	mw->rkey = k;
	write_ok(p, "the re-bound window", baddr(T4 + 100), k, T4 + 100, 100);
	CHECK(ibv_dealloc_mw(mw) == 0, "the window deallocated while bound");
	access_fails(p, 0, 0, "a WRITE with the deallocated type 2 window's rkey",
		     IBV_WR_RDMA_WRITE, baddr(T4 + 100), k, T4 + 100, 16);
}

/* A zero-based type 2 window. */
static void test_zero_based(struct pair *p)
{
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t k;
	int r;

	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	CHECK(mw != NULL, "a type 2 window allocated for a zero-based bind");
	if (!mw)
		return;
	k = ibv_inc_rkey(mw->rkey);
	r = bind2(p->b, mw, k, ZB, 8192,
		  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED, &wc);
	CHECK(r == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "a zero-based type 2 bind over buf+[%d, %d): %s%s", ZB, ZB + 8192, st(r),
	      r == IBV_WC_SUCCESS ? "" : " (the zero-based type 2 bind was REFUSED)");
	if (r != IBV_WC_SUCCESS) {
		ibv_dealloc_mw(mw);
		pair_new(p, 0);
		return;
	}
	mw->rkey = k;
	write_ok(p, "zero-based, remote address 0x100 lands at the window's start + 0x100", 0x100,
		 k, ZB + 0x100, 256);
	read_ok(p, "zero-based, remote address 0, the whole window", 0, k, ZB, 8192);
	access_fails(p, -1, 1, "zero-based: a WRITE of 1 byte at remote address 8192",
		     IBV_WR_RDMA_WRITE, 8192, k, ZB + 8192, 1);
	/* Before its QP goes: rxe's QP would wait for the window's reference. */
	CHECK(ibv_dealloc_mw(mw) == 0, "the zero-based window deallocated while bound");
	renew(p, 0, "fresh QPs");
}

/* Exit with windows bound, freeing nothing. */
static int leave_bound(int mw_first)
{
	struct pair p = { 0 };
	struct ibv_mw *m1 = NULL, *m2 = NULL;
	struct ibv_wc wc;
	uint32_t k;
	int r, ret;

	if (mw_first)
		m2 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	renew(&p, 0, "RC QPs connected");
	m1 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	if (!mw_first)
		m2 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	CHECK(m1 && m2, "a type 1 and a type 2 window allocated (the type 2 %s its QP)",
	      mw_first ? "before" : "after");
	if (!m1 || !m2 || !p.b)
		return 1;
	r = bind1(p.b, m1, B.mr, W1, W1_LEN, RW_ALL, &wc, &ret);
	CHECK(r == IBV_WC_SUCCESS, "type 1 bound: %s", st(r));
	write_ok(&p, "type 1", baddr(W1), m1->rkey, W1, 4096);
	k = ibv_inc_rkey(m2->rkey);
	r = bind2(p.b, m2, k, T2, 8192, RW_ALL, &wc);
	CHECK(r == IBV_WC_SUCCESS, "type 2 bound: %s", st(r));
	write_ok(&p, "type 2", baddr(T2), k, T2, 4096);
	if (failures) {
		printf("%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed; exiting with both windows bound, nothing freed\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct pair p = { 0 };
	struct ibv_mw *w1, *ro = NULL;
	int ok;

	if (argc < 5) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B [rxe | leave [mw-first]]\n",
			argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rxe_ref = argc > 5 && !strcmp(argv[5], "rxe");
	if (open_side(&A, argv[1], atoi(argv[2]), IBV_ACCESS_LOCAL_WRITE) ||
	    open_side(&B, argv[3], atoi(argv[4]),
		      IBV_ACCESS_LOCAL_WRITE | RW_ALL | IBV_ACCESS_MW_BIND)) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		return 1;
	}
	fill(B.buf, BUF_SIZE, 12345);
	memcpy(shadow, B.buf, BUF_SIZE);
	b_nobind = ibv_reg_mr(B.pd, B.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | RW_ALL);
	if (!b_nobind) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		return 1;
	}
	if (argc > 5 && !strcmp(argv[5], "leave"))
		return leave_bound(argc > 6 && !strcmp(argv[6], "mw-first"));

	test_caps();
	renew(&p, 0, "RC QPs connected (A requests, B owns the windows)");
	if (!p.b)
		return 1;
	w1 = test_type1(&p, &ro);
	test_bind_errors(&p);
	test_type2(&p);
	test_type2_inv(&p);
	test_type2_ex(&p);
	renew(&p, 0, "fresh QPs");
	test_zero_based(&p);

	/* Teardown: the PDs deallocate only if nothing is left in them. */
	pair_free(&p);
	ok = (!w1 || ibv_dealloc_mw(w1) == 0) && (!ro || ibv_dealloc_mw(ro) == 0);
	ok = ok && !ibv_dereg_mr(b_nobind) && !ibv_dereg_mr(B.mr) && !ibv_dereg_mr(A.mr);
	ok = ok && !ibv_dealloc_pd(B.pd) && !ibv_dealloc_pd(A.pd);
	ok = ok && !ibv_destroy_cq(A.scq) && !ibv_destroy_cq(A.rcq) && !ibv_destroy_cq(B.scq) &&
	     !ibv_destroy_cq(B.rcq);
	ok = ok && !ibv_close_device(A.ctx) && !ibv_close_device(B.ctx);
	CHECK(ok, "everything destroyed: windows, MRs, PDs, CQs, devices%s", why(!ok));
	if (failures) {
		printf("%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
