// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_uc DEV_A GID_A DEV_B GID_B [lossy|data]: the unreliable connected
 * service (UC) between a QP on A (requester) and one on B (responder).
 *
 * Checks: SEND (one and several packets, path MTU 1024, gathered and
 * scattered), SEND with immediate, RDMA WRITE (placed at B without a
 * completion there) and WRITE with immediate, each byte for byte; that a
 * message finding no receive WQE, or a WRITE with a bad rkey, is dropped
 * silently at B (the requester completes successfully, B counts the
 * packets in rcvd_drop_uc, B's QP stays in RTS and its receive WQE serves
 * the next message); that READ, atomics
 * and SEND with invalidate, which UC does not carry, complete with
 * LOC_QP_OP_ERR; that a SEND larger than its receive WQE completes it with
 * LOC_LEN_ERR and moves B's QP to ERR.
 *
 * "lossy" (the link drops packets): many multi-packet messages; every
 * send completes successfully, and what B receives is a subsequence of
 * what was sent, in order, each message intact; both QPs stay in RTS.
 *
 * "data": only the data checks (for a peer of another provider, whose
 * handling of errors may differ).
 *
 * One line per check; "all checks passed" and exit 0 only if all passed.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define BUF_SIZE (256 * 1024)
#define TIMEOUT_MS 10000

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	int gid_index;
	union ibv_gid gid;
	uint8_t *buf;
	struct ibv_mr *mr;
};

static struct side A, B;
static const char *dev_b;
static uint32_t psn_base = 0x2000;

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return poll_cq_within(cq, wc, scaled_ms(TIMEOUT_MS));
}

static int open_side(struct side *s, const char *dev, int gid_index)
{
	s->gid_index = gid_index;
	if (open_port(dev, gid_index, 256, &s->ctx, &s->gid, &s->pd, &s->scq, &s->rcq))
		return -1;
	if (posix_memalign((void **)&s->buf, 4096, BUF_SIZE))
		return -1;
	memset(s->buf, 0, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	return s->mr ? 0 : -1;
}

static int make_qp(struct side *s)
{
	struct ibv_qp_init_attr init = {
		.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 2,
			 .max_recv_sge = 2 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	s->qp = ibv_create_qp(s->pd, &init);
	if (!s->qp)
		return -1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR -> RTS with the attributes UC takes (no timeout, retries,
 * RNR timer or READ/atomic depth). */
static int uc_connect(struct side *s, struct side *peer, uint32_t sq_psn, uint32_t rq_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = rq_psn,
		.ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = peer->gid, .sgid_index = s->gid_index, .hop_limit = 64 },
		},
	};

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* Fresh, connected UC QPs on both sides. */
static int connect_pair(void)
{
	uint32_t pa = psn_base, pb = psn_base + 0x555;

	psn_base += 0x10000;
	if (A.qp)
		ibv_destroy_qp(A.qp);
	if (B.qp)
		ibv_destroy_qp(B.qp);
	A.qp = B.qp = NULL;
	drain(A.scq);
	drain(A.rcq);
	drain(B.scq);
	drain(B.rcq);
	if (make_qp(&A) || make_qp(&B))
		return -1;
	return uc_connect(&A, &B, pa, pb) || uc_connect(&B, &A, pb, pa) ? -1 : 0;
}

static struct ibv_sge sge(struct side *s, size_t off, uint32_t len)
{
	struct ibv_sge g = { .addr = (uintptr_t)(s->buf + off), .length = len,
			     .lkey = s->mr->lkey };
	return g;
}

static int post_recv(struct side *s, uint64_t wr_id, struct ibv_sge *sg, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n }, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

static int post_send(struct side *s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	wr->send_flags |= IBV_SEND_SIGNALED;
	return ibv_post_send(s->qp, wr, &bad);
}

/* The next completion on cq is wr_id with status (and, on success,
 * opcode); *out gets it. */
static int expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, int opcode,
		     struct ibv_wc *out)
{
	struct ibv_wc wc;

	if (!poll_one(cq, &wc)) {
		printf("     (no completion for wr_id %" PRIu64 ")\n", wr_id);
		return 0;
	}
	if (out)
		*out = wc;
	if (wc.wr_id != wr_id || wc.status != st ||
	    (opcode >= 0 && st == IBV_WC_SUCCESS && (int)wc.opcode != opcode)) {
		printf("     (got wr_id %" PRIu64 " status %s opcode %d, want wr_id %" PRIu64
		       " status %s opcode %d)\n", wc.wr_id, ibv_wc_status_str(wc.status),
		       wc.opcode, wr_id, ibv_wc_status_str(st), opcode);
		return 0;
	}
	return 1;
}

/* SEND from A's buf[0..len) (two SGEs) into B's buf at 64 KiB (two SGEs),
 * with an immediate if imm. */
static void send_one(uint32_t len, int imm, uint64_t id)
{
	uint32_t half = len / 2;
	struct ibv_sge s[2] = { sge(&A, 0, half), sge(&A, half, len - half) };
	struct ibv_sge r[2] = { sge(&B, 65536, 1000), sge(&B, 65536 + 1000, 100000) };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = s, .num_sge = 2,
				  .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND };
	struct ibv_wc wc;
	int ok;

	fill(A.buf, len, len + imm);
	memset(B.buf + 65536, 0xee, 110000);
	wr.imm_data = htonl(0x5e000000 | len);
	CHECK(post_recv(&B, id + 1000, r, 2) == 0, "post a receive");
	CHECK(post_send(&A, &wr) == 0, "post SEND%s of %u bytes", imm ? "_WITH_IMM" : "", len);
	CHECK(expect_wc(A.scq, id, IBV_WC_SUCCESS, IBV_WC_SEND, &wc),
	      "SEND %u: requester completion", len);
	ok = expect_wc(B.rcq, id + 1000, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	CHECK(ok && wc.byte_len == len && wc.qp_num == B.qp->qp_num,
	      "SEND %u: receive completion on B's QP, byte_len %u", len, wc.byte_len);
	if (imm)
		CHECK(ok && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      wc.imm_data == htonl(0x5e000000 | len),
		      "SEND_WITH_IMM %u: the immediate", len);
	CHECK(!memcmp(B.buf + 65536, A.buf, len) && B.buf[65536 + len] == 0xee,
	      "SEND %u: the bytes arrived across the SGEs, and nothing after them", len);
}

/* RDMA WRITE of len bytes to B's buf + roff, with an immediate if imm. */
static void write_one(uint32_t len, int imm, uint64_t id)
{
	size_t roff = 7;
	struct ibv_sge s = sge(&A, 0, len);
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				  .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE };
	struct ibv_wc wc;
	long end;
	int ok;

	fill(A.buf, len, len * 3 + imm);
	memset(B.buf, 0xee, roff + len + 1);
	wr.wr.rdma.remote_addr = (uintptr_t)(B.buf + roff);
	wr.wr.rdma.rkey = B.mr->rkey;
	wr.imm_data = htonl(0x3e000000 | len);
	if (imm)
		CHECK(post_recv(&B, id + 1000, NULL, 0) == 0, "post a receive for the immediate");
	CHECK(post_send(&A, &wr) == 0, "post WRITE%s of %u bytes", imm ? "_WITH_IMM" : "", len);
	CHECK(expect_wc(A.scq, id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, &wc),
	      "WRITE %u: requester completion", len);
	if (imm) {
		ok = expect_wc(B.rcq, id + 1000, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, &wc);
		CHECK(ok && wc.byte_len == len && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      wc.imm_data == htonl(0x3e000000 | len),
		      "WRITE_WITH_IMM %u: receive completion with the immediate", len);
	}
	/* A plain WRITE completes nowhere at B: wait for its bytes. */
	end = now_ms() + scaled_ms(TIMEOUT_MS);
	while (memcmp(B.buf + roff, A.buf, len) && now_ms() < end)
		usleep(1000);
	CHECK(!memcmp(B.buf + roff, A.buf, len) && B.buf[roff - 1] == 0xee &&
	      B.buf[roff + len] == 0xee, "WRITE%s %u: the bytes arrived, and nothing around them",
	      imm ? "_WITH_IMM" : "", len);
}

static void test_data(void)
{
	static const uint32_t sizes[] = { 0, 1, 1024, 1025, 5000, 65536 + 3 };
	unsigned int i;

	CHECK(connect_pair() == 0, "UC QPs connected (RTR with AV/MTU/DQPN/RQ_PSN, RTS with SQ_PSN)");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		send_one(sizes[i], i & 1, 10 + i);
		write_one(sizes[i] ? sizes[i] : 1, !(i & 1), 20 + i);
	}
	CHECK(qp_state(A.qp) == IBV_QPS_RTS && qp_state(B.qp) == IBV_QPS_RTS,
	      "both QPs still in RTS");
}

/* B's port counter `name`, or -1. */
static long counter(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev_b,
		 name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Waits until B's counter `name` reaches at least `target`: B has handled
 * the packets that A's completions (at send) say nothing about. */
static int wait_counter(const char *name, long target)
{
	long end = now_ms() + scaled_ms(TIMEOUT_MS);

	while (counter(name) < target && now_ms() < end)
		usleep(1000);
	return counter(name) >= target;
}

/* A message B cannot take is dropped there; A never knows. Each is 3
 * packets, all dropped (rcvd_drop_uc). */
static void test_drops(void)
{
	struct ibv_sge s = sge(&A, 0, 3000), r = sge(&B, 65536, 4096);
	struct ibv_send_wr wr = { .wr_id = 40, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM };
	struct ibv_wc wc;
	int ok;

	long drops;

	CHECK(connect_pair() == 0, "fresh UC QPs");
	drops = counter("rcvd_drop_uc");
	/* No receive WQE at B. */
	wr.imm_data = htonl(1);
	CHECK(post_send(&A, &wr) == 0 && expect_wc(A.scq, 40, IBV_WC_SUCCESS, IBV_WC_SEND, NULL),
	      "SEND to a QP with no receive posted: requester completes successfully");
	CHECK(wait_counter("rcvd_drop_uc", drops + 3), "B dropped its 3 packets (rcvd_drop_uc %ld -> %ld)",
	      drops, counter("rcvd_drop_uc"));
	/* A WRITE with immediate under a bad rkey. */
	wr.wr_id = 41;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(2);
	wr.wr.rdma.remote_addr = (uintptr_t)B.buf;
	wr.wr.rdma.rkey = B.mr->rkey ^ 0x5a5a00;
	CHECK(post_recv(&B, 1041, &r, 1) == 0, "post one receive at B");
	CHECK(post_send(&A, &wr) == 0 && expect_wc(A.scq, 41, IBV_WC_SUCCESS, -1, NULL),
	      "WRITE_WITH_IMM under a bad rkey: requester completes successfully");
	CHECK(wait_counter("rcvd_drop_uc", drops + 6), "B dropped its 3 packets too (%ld -> %ld)",
	      drops, counter("rcvd_drop_uc"));
	CHECK(ibv_poll_cq(B.rcq, 1, &wc) == 0, "neither message completed anything at B");
	/* The receive WQE is still there for the next message. */
	wr.wr_id = 42;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(3);
	fill(A.buf, 3000, 42);
	CHECK(post_send(&A, &wr) == 0 && expect_wc(A.scq, 42, IBV_WC_SUCCESS, IBV_WC_SEND, NULL),
	      "a third SEND completes at A");
	ok = expect_wc(B.rcq, 1041, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	CHECK(ok && wc.imm_data == htonl(3) && wc.byte_len == 3000 &&
	      !memcmp(B.buf + 65536, A.buf, 3000),
	      "it took the receive the dropped messages left, bytes intact");
	CHECK(qp_state(A.qp) == IBV_QPS_RTS && qp_state(B.qp) == IBV_QPS_RTS,
	      "both QPs still in RTS after the drops");
}

/* What UC does not carry fails at the requester. */
static void test_refused(void)
{
	static const struct {
		enum ibv_wr_opcode op;
		const char *name;
	} ops[] = {
		{ IBV_WR_RDMA_READ, "RDMA READ" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, "FETCH_AND_ADD" },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, "CMP_AND_SWP" },
		{ IBV_WR_SEND_WITH_INV, "SEND_WITH_INV" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct ibv_sge s = sge(&A, 0, 8);
		struct ibv_send_wr wr = { .wr_id = 50 + i, .sg_list = &s, .num_sge = 1,
					  .opcode = ops[i].op };
		int r;

		CHECK(connect_pair() == 0, "fresh UC QPs");
		wr.wr.rdma.remote_addr = (uintptr_t)B.buf;
		wr.wr.rdma.rkey = B.mr->rkey;
		if (ops[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD || ops[i].op == IBV_WR_ATOMIC_CMP_AND_SWP) {
			wr.wr.atomic.remote_addr = (uintptr_t)B.buf;
			wr.wr.atomic.rkey = B.mr->rkey;
		}
		if (ops[i].op == IBV_WR_SEND_WITH_INV)
			wr.invalidate_rkey = B.mr->rkey;
		r = post_send(&A, &wr);
		if (r) {
			CHECK(r == EINVAL, "%s on UC refused at post (%d)", ops[i].name, r);
			continue;
		}
		CHECK(expect_wc(A.scq, 50 + i, IBV_WC_LOC_QP_OP_ERR, -1, NULL),
		      "%s on UC completes with LOC_QP_OP_ERR", ops[i].name);
		CHECK(qp_state_within(A.qp, IBV_QPS_ERR, scaled_ms(1000)), "%s: A's QP is in ERR",
		      ops[i].name);
	}
}

/* A SEND larger than its receive WQE: B's local error. */
static void test_too_small(void)
{
	struct ibv_sge s = sge(&A, 0, 2000), r = sge(&B, 65536, 1500);
	struct ibv_send_wr wr = { .wr_id = 60, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_SEND };

	CHECK(connect_pair() == 0, "fresh UC QPs");
	CHECK(post_recv(&B, 1060, &r, 1) == 0, "post a 1500-byte receive");
	CHECK(post_send(&A, &wr) == 0 && expect_wc(A.scq, 60, IBV_WC_SUCCESS, IBV_WC_SEND, NULL),
	      "2000-byte SEND: requester completes successfully");
	CHECK(expect_wc(B.rcq, 1060, IBV_WC_LOC_LEN_ERR, -1, NULL),
	      "the receive completes with LOC_LEN_ERR");
	CHECK(qp_state_within(B.qp, IBV_QPS_ERR, scaled_ms(1000)), "B's QP is in ERR");
}

/* Over a lossy link: what arrives is intact and in order. Receive k
 * lands in its own slot of B's buffer; message n carries n as its
 * immediate and the bytes fill(n). */
static void test_lossy(void)
{
	enum { MSGS = 100, LEN = 2500 };
	uint8_t want[LEN];
	struct ibv_wc wc;
	uint32_t last = 0;
	int i, sent = 0, got = 0, bad = 0, order = 0;

	CHECK(connect_pair() == 0, "fresh UC QPs");
	for (i = 0; i < MSGS; i++) {
		struct ibv_sge r = sge(&B, (size_t)i * LEN, LEN);

		if (post_recv(&B, i, &r, 1))
			break;
	}
	CHECK(i == MSGS, "post %d receives, each into its own slot", MSGS);
	for (i = 0; i < MSGS; i++) {
		struct ibv_sge s = sge(&A, (size_t)i * LEN, LEN);
		struct ibv_send_wr wr = { .wr_id = 3000 + i, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM, .imm_data = htonl(i + 1) };

		fill(A.buf + (size_t)i * LEN, LEN, i + 1);
		if (post_send(&A, &wr))
			break;
	}
	for (i = 0; i < MSGS; i++)
		sent += expect_wc(A.scq, 3000 + i, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	CHECK(sent == MSGS, "all %d SENDs completed successfully at A", MSGS);
	/* Nothing is resent: once B is quiet for a while, all that will
	 * arrive has. */
	while (poll_cq_within(B.rcq, &wc, scaled_ms(500))) {
		uint32_t n = ntohl(wc.imm_data);

		fill(want, LEN, n);
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)(got + bad) ||
		    wc.byte_len != LEN || memcmp(B.buf + wc.wr_id * LEN, want, LEN))
			bad++;
		else
			got++;
		order += n <= last || n > MSGS;
		last = n;
	}
	printf("     (B received %d of %d messages intact)\n", got, MSGS);
	CHECK(bad == 0, "every message B received is intact, its receives taken in order (%d not)",
	      bad);
	CHECK(order == 0, "messages in the order sent, each once (%d not)", order);
	CHECK(qp_state(A.qp) == IBV_QPS_RTS && qp_state(B.qp) == IBV_QPS_RTS,
	      "both QPs still in RTS");
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B [lossy|data]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	dev_b = argv[3];
	if (open_side(&A, argv[1], atoi(argv[2])) || open_side(&B, argv[3], atoi(argv[4]))) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		return 1;
	}
	if (argc > 5 && !strcmp(argv[5], "lossy")) {
		test_lossy();
	} else if (argc > 5 && !strcmp(argv[5], "data")) {
		/* Against another provider: what the wire must carry alike. */
		test_data();
	} else {
		test_data();
		test_drops();
		test_refused();
		test_too_small();
	}
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
