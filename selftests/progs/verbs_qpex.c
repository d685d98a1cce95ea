// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_qpex DEV_A GID_A DEV_B GID_B: every operation sroce carries,
 * posted through the extended QP API (ibv_create_qp_ex with send_ops_flags,
 * ibv_wr_start / ibv_wr_* / ibv_wr_complete), A requesting, B responding:
 *   - RC: SEND, SEND with immediate, RDMA WRITE, WRITE with immediate,
 *     RDMA READ, compare-and-swap, fetch-and-add, ATOMIC WRITE (and one
 *     at an unaligned address, refused); SGE lists (with SGEs of
 *     different lengths, whose total rdma-core 44's rxe library gets
 *     wrong), inline data, several work requests in one batch, an
 *     unsignaled one among them, and a batch abandoned with ibv_wr_abort
 *     (nothing of it sent);
 *   - UC: SEND with immediate and WRITE;
 *   - UD: SEND with an address handle (ibv_wr_set_ud_addr), with immediate;
 * each byte for byte, with the completions' opcodes and lengths.
 *
 * One line per check; "all checks passed" and exit 0 only if all passed.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include "common.h"

#define BUF_SIZE (64 * 1024)
#define TIMEOUT_MS 10000
#define QKEY 0x11111111

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	int gid_index;
	union ibv_gid gid;
	uint8_t *buf;
	struct ibv_mr *mr;
};

static struct side A, B;
/* A is a device of the kernel's rxe (the reference run). */
static int a_is_rxe;

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return poll_cq_within(cq, wc, scaled_ms(TIMEOUT_MS));
}

/* The next completion on cq is wr_id, successful, with opcode. */
static int expect_wc(struct ibv_cq *cq, uint64_t wr_id, int opcode, struct ibv_wc *out)
{
	struct ibv_wc wc;

	if (!poll_one(cq, &wc)) {
		printf("     (no completion for wr_id %" PRIu64 ")\n", wr_id);
		return 0;
	}
	if (out)
		*out = wc;
	if (wc.wr_id != wr_id || wc.status != IBV_WC_SUCCESS || (int)wc.opcode != opcode) {
		printf("     (got wr_id %" PRIu64 " status %s opcode %d, want wr_id %" PRIu64
		       " opcode %d)\n", wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wr_id,
		       opcode);
		return 0;
	}
	return 1;
}

static int open_side(struct side *s, const char *dev, int gid_index)
{
	s->gid_index = gid_index;
	if (open_port(dev, gid_index, 64, &s->ctx, &s->gid, &s->pd, &s->scq, &s->rcq))
		return -1;
	if (posix_memalign((void **)&s->buf, 4096, BUF_SIZE))
		return -1;
	memset(s->buf, 0, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	return s->mr ? 0 : -1;
}

/* A QP of type t with the extended API for ops; NULL and errno on failure. */
static struct ibv_qp *make_qp_ex(struct side *s, enum ibv_qp_type t, uint64_t ops)
{
	struct ibv_qp_init_attr_ex init = {
		.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = t,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd, .send_ops_flags = ops,
	};

	return ibv_create_qp_ex(s->ctx, &init);
}

static int to_init(struct ibv_qp *qp, enum ibv_qp_type t)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
}

/* INIT -> RTR -> RTS towards peer, with what the QP type takes. */
static int connect_to(struct side *s, struct side *peer, enum ibv_qp_type t)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask = IBV_QP_STATE;

	if (t == IBV_QPT_RC)
		return rc_connect(s->qp, s->gid_index, &peer->gid, peer->qp->qp_num, 0x100, 0x100, 4);
	if (t == IBV_QPT_UC) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer->qp->qp_num;
		a.rq_psn = 0x200;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = s->gid_index;
		a.ah_attr.grh.hop_limit = 64;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	}
	if (ibv_modify_qp(s->qp, &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x200;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* Fresh QPs of type t on both sides, A's with the extended API. */
static int make_pair(enum ibv_qp_type t, uint64_t ops)
{
	if (A.qp)
		ibv_destroy_qp(A.qp);
	if (B.qp)
		ibv_destroy_qp(B.qp);
	drain(A.scq);
	drain(A.rcq);
	drain(B.scq);
	drain(B.rcq);
	A.qp = make_qp_ex(&A, t, ops);
	B.qp = make_qp_ex(&B, t, IBV_QP_EX_WITH_SEND);
	if (!A.qp || !B.qp)
		return -1;
	A.qpx = ibv_qp_to_qp_ex(A.qp);
	if (!A.qpx || to_init(A.qp, t) || to_init(B.qp, t))
		return -1;
	return connect_to(&A, &B, t) || connect_to(&B, &A, t) ? -1 : 0;
}

static int post_recv(struct side *s, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge g = { .addr = (uintptr_t)(s->buf + off), .length = len,
			     .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &g, .num_sge = 1 }, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

/* A's buffer at off, len bytes, as an SGE. */
static struct ibv_sge a_sge(size_t off, uint32_t len)
{
	struct ibv_sge g = { .addr = (uintptr_t)(A.buf + off), .length = len,
			     .lkey = A.mr->lkey };
	return g;
}

static void test_rc(void)
{
	const uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE;
	const uint64_t stored = 0x0123456789abcdefULL;
	struct ibv_qp_ex *x;
	struct ibv_sge sg[2];
	struct ibv_wc wc;
	uint64_t *ctr;
	int ok;

	CHECK(make_pair(IBV_QPT_RC, ops) == 0, "RC QPs, A's through ibv_create_qp_ex (%s)",
	      strerror(errno));
	if (!A.qp || !B.qp)
		return;
	x = A.qpx;
	fill(A.buf, BUF_SIZE, 7);
	memset(B.buf, 0, BUF_SIZE);
	ctr = (uint64_t *)(B.buf + 60000);
	*ctr = 100;
	CHECK(post_recv(&B, 201, 0, 8192) == 0 && post_recv(&B, 202, 8192, 8192) == 0 &&
	      post_recv(&B, 203, 16384, 8192) == 0 && post_recv(&B, 204, 24576, 64) == 0,
	      "post four receives at B");

	/* One batch: SEND (2 SGEs), SEND_WITH_IMM, WRITE (unsignaled),
	 * WRITE_WITH_IMM, READ, CMP_AND_SWP, FETCH_AND_ADD, inline SEND. */
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	sg[0] = a_sge(0, 1000);
	sg[1] = a_sge(1000, 2100);
	ibv_wr_set_sge_list(x, 2, sg);
	x->wr_id = 2;
	ibv_wr_send_imm(x, htonl(0xabcd));
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 4000), 5000);
	x->wr_id = 3;
	x->wr_flags = 0;
	ibv_wr_rdma_write(x, B.mr->rkey, (uintptr_t)(B.buf + 32768));
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 10000), 7000);
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(x, B.mr->rkey, (uintptr_t)(B.buf + 50000), htonl(0x1234));
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 20000), 3000);
	x->wr_id = 5;
	ibv_wr_rdma_read(x, B.mr->rkey, (uintptr_t)(B.buf + 32768));
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 40000), 7000);
	x->wr_id = 6;
	ibv_wr_atomic_cmp_swp(x, B.mr->rkey, (uintptr_t)ctr, 100, 555);
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 48000), 8);
	x->wr_id = 7;
	ibv_wr_atomic_fetch_add(x, B.mr->rkey, (uintptr_t)ctr, 45);
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 48008), 8);
	/* The rxe library marks nothing itself: inline data is the
	 * IBV_SEND_INLINE flag's (as for ibv_post_send). Not
	 * ibv_wr_set_inline_data_list: rdma-core 44's rxe library never adds
	 * up its length (every list goes out as 0 bytes, on rxe too). */
	x->wr_id = 8;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, A.buf + 30000, 50);
	CHECK(ibv_wr_complete(x) == 0, "a batch of eight work requests posted (%s)", strerror(errno));

	CHECK(expect_wc(A.scq, 1, IBV_WC_SEND, NULL), "SEND completed at A");
	CHECK(expect_wc(A.scq, 2, IBV_WC_SEND, NULL), "SEND_WITH_IMM completed at A");
	CHECK(expect_wc(A.scq, 4, IBV_WC_RDMA_WRITE, NULL),
	      "WRITE_WITH_IMM completed at A (the unsignaled WRITE before it did not show)");
	CHECK(expect_wc(A.scq, 5, IBV_WC_RDMA_READ, &wc) && wc.byte_len == 7000,
	      "READ completed at A (byte_len %u)", wc.byte_len);
	CHECK(expect_wc(A.scq, 6, IBV_WC_COMP_SWAP, NULL), "CMP_AND_SWP completed at A");
	CHECK(expect_wc(A.scq, 7, IBV_WC_FETCH_ADD, NULL), "FETCH_AND_ADD completed at A");
	CHECK(expect_wc(A.scq, 8, IBV_WC_SEND, NULL), "inline SEND completed at A");

	ok = expect_wc(B.rcq, 201, IBV_WC_RECV, &wc);
	if (a_is_rxe && ok && wc.byte_len == 2000) {
		/* rxe sends the total the library wrote: 2 x the first SGE. */
		printf("note: rxe sent the two-SGE SEND as %u bytes (the library's total)\n",
		       wc.byte_len);
	} else {
		CHECK(ok && wc.byte_len == 3100 && !memcmp(B.buf, A.buf, 3100),
		      "B received the two-SGE SEND intact (%u bytes)", wc.byte_len);
	}
	ok = expect_wc(B.rcq, 202, IBV_WC_RECV, &wc);
	CHECK(ok && wc.byte_len == 5000 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      wc.imm_data == htonl(0xabcd) && !memcmp(B.buf + 8192, A.buf + 4000, 5000),
	      "B received the SEND_WITH_IMM intact, with its immediate");
	ok = expect_wc(B.rcq, 203, IBV_WC_RECV_RDMA_WITH_IMM, &wc);
	CHECK(ok && wc.byte_len == 3000 && wc.imm_data == htonl(0x1234) &&
	      !memcmp(B.buf + 50000, A.buf + 20000, 3000),
	      "the WRITE_WITH_IMM landed and consumed a receive with its immediate");
	CHECK(!memcmp(B.buf + 32768, A.buf + 10000, 7000), "the unsignaled WRITE landed");
	CHECK(!memcmp(A.buf + 40000, A.buf + 10000, 7000),
	      "the READ after it returned what the WRITE wrote");
	CHECK(*(uint64_t *)(A.buf + 48000) == 100 && *(uint64_t *)(A.buf + 48008) == 555 &&
	      *ctr == 600, "atomics: originals 100 and 555 returned, memory now 600");
	ok = expect_wc(B.rcq, 204, IBV_WC_RECV, &wc);
	CHECK(ok && wc.byte_len == 50 && !memcmp(B.buf + 24576, A.buf + 30000, 50),
	      "B received the inline SEND intact (%u bytes)", wc.byte_len);

	/* An abandoned batch posts nothing. */
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, A.buf, 8);
	ibv_wr_abort(x);
	usleep(scaled_ms(50) * 1000);
	CHECK(ibv_poll_cq(A.scq, 1, &wc) == 0, "an aborted batch completes nothing");
	/* And the queue goes on after it. */
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write(x, B.mr->rkey, (uintptr_t)(B.buf + 100));
	ibv_wr_set_inline_data(x, A.buf + 777, 40);
	CHECK(ibv_wr_complete(x) == 0 && expect_wc(A.scq, 10, IBV_WC_RDMA_WRITE, NULL) &&
	      !memcmp(B.buf + 100, A.buf + 777, 40), "an inline WRITE after it lands");

	/* ATOMIC WRITE: 8 bytes stored at once, its own completion opcode;
	 * then one at an unaligned address, which the responder refuses. */
	memset(B.buf + 61000, 0x5a, 24);
	ibv_wr_start(x);
	x->wr_id = 11;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(x, B.mr->rkey, (uintptr_t)(B.buf + 61008), &stored);
	CHECK(ibv_wr_complete(x) == 0 && expect_wc(A.scq, 11, IBV_WC_ATOMIC_WRITE, &wc),
	      "ATOMIC_WRITE completed at A (opcode %d)", wc.opcode);
	CHECK(!memcmp(B.buf + 61008, &stored, 8) && B.buf[61007] == 0x5a && B.buf[61016] == 0x5a,
	      "its 8 bytes landed, and nothing around them");
	ibv_wr_start(x);
	x->wr_id = 12;
	ibv_wr_atomic_write(x, B.mr->rkey, (uintptr_t)(B.buf + 61004), &stored);
	CHECK(ibv_wr_complete(x) == 0 && poll_one(A.scq, &wc) && wc.wr_id == 12 &&
	      wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "an unaligned ATOMIC_WRITE fails with REM_INV_REQ_ERR (%s)",
	      ibv_wc_status_str(wc.status));
	CHECK(*(uint32_t *)(B.buf + 61004) == 0x5a5a5a5a, "and stores nothing");
}

static void test_uc(void)
{
	struct ibv_qp_ex *x;
	struct ibv_wc wc;
	int ok;

	CHECK(make_pair(IBV_QPT_UC, IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE) == 0,
	      "UC QPs, A's through ibv_create_qp_ex (%s)", strerror(errno));
	if (!A.qp || !B.qp)
		return;
	x = A.qpx;
	fill(A.buf, BUF_SIZE, 11);
	memset(B.buf, 0, BUF_SIZE);
	CHECK(post_recv(&B, 301, 0, 8192) == 0, "post a receive at B");
	ibv_wr_start(x);
	x->wr_id = 31;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, B.mr->rkey, (uintptr_t)(B.buf + 16384));
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 100), 6000);
	x->wr_id = 32;
	ibv_wr_send_imm(x, htonl(77));
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 9000), 4000);
	CHECK(ibv_wr_complete(x) == 0, "UC WRITE and SEND_WITH_IMM posted in one batch");
	CHECK(expect_wc(A.scq, 31, IBV_WC_RDMA_WRITE, NULL) &&
	      expect_wc(A.scq, 32, IBV_WC_SEND, NULL), "both completed at A");
	ok = expect_wc(B.rcq, 301, IBV_WC_RECV, &wc);
	CHECK(ok && wc.byte_len == 4000 && wc.imm_data == htonl(77) &&
	      !memcmp(B.buf, A.buf + 9000, 4000), "B received the SEND_WITH_IMM intact");
	CHECK(!memcmp(B.buf + 16384, A.buf + 100, 6000),
	      "the WRITE before it landed (the SEND arrived after it)");
}

static void test_ud(void)
{
	struct ibv_ah_attr ah_attr = {
		.is_global = 1, .port_num = 1,
		.grh = { .sgid_index = 0, .hop_limit = 64 },
	};
	struct ibv_qp_ex *x;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	int ok;

	CHECK(make_pair(IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM) == 0,
	      "UD QPs, A's through ibv_create_qp_ex (%s)", strerror(errno));
	if (!A.qp || !B.qp)
		return;
	x = A.qpx;
	ah_attr.grh.dgid = B.gid;
	ah_attr.grh.sgid_index = A.gid_index;
	ah = ibv_create_ah(A.pd, &ah_attr);
	CHECK(ah != NULL, "an address handle for B");
	if (!ah)
		return;
	fill(A.buf, BUF_SIZE, 13);
	memset(B.buf, 0, BUF_SIZE);
	CHECK(post_recv(&B, 401, 0, 40 + 900) == 0 && post_recv(&B, 402, 4096, 40 + 900) == 0,
	      "post two receives at B (40-byte GRH + payload)");
	ibv_wr_start(x);
	x->wr_id = 41;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_ud_addr(x, ah, B.qp->qp_num, QKEY);
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 500), 900);
	x->wr_id = 42;
	ibv_wr_send_imm(x, htonl(0x99));
	ibv_wr_set_ud_addr(x, ah, B.qp->qp_num, QKEY);
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)(A.buf + 2000), 33);
	CHECK(ibv_wr_complete(x) == 0, "two UD SENDs posted in one batch");
	CHECK(expect_wc(A.scq, 41, IBV_WC_SEND, NULL) && expect_wc(A.scq, 42, IBV_WC_SEND, NULL),
	      "both completed at A");
	ok = expect_wc(B.rcq, 401, IBV_WC_RECV, &wc);
	CHECK(ok && wc.byte_len == 40 + 900 && wc.src_qp == A.qp->qp_num &&
	      !memcmp(B.buf + 40, A.buf + 500, 900), "B received the first datagram intact");
	ok = expect_wc(B.rcq, 402, IBV_WC_RECV, &wc);
	CHECK(ok && wc.byte_len == 40 + 33 && wc.imm_data == htonl(0x99) &&
	      !memcmp(B.buf + 4096 + 40, A.buf + 2000, 33),
	      "B received the second with its immediate");
	ibv_destroy_qp(A.qp);
	A.qp = NULL;
	ibv_destroy_ah(ah);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	a_is_rxe = !strncmp(argv[1], "rxe", 3);
	if (open_side(&A, argv[1], atoi(argv[2])) || open_side(&B, argv[3], atoi(argv[4]))) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		return 1;
	}
	test_rc();
	test_uc();
	test_ud();
	if (A.qp)
		ibv_destroy_qp(A.qp);
	if (B.qp)
		ibv_destroy_qp(B.qp);
	if (failures) {
		printf("%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
