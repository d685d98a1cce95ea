// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_srq_ah DEVICE GID_INDEX: shared receive queues and address handles
 * through the rxe provider library: sizes and limits, the SRQ limit, a QP
 * receiving from an SRQ, resizing an SRQ, the core refusing to destroy an
 * SRQ in use, AH create/query/destroy, and UD datagrams received through an
 * SRQ. One line per check; exits 0 only if all passed.
 */
#include "common.h"
#include <unistd.h>

#define UD_QKEY 0x11111111

static int ud_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = UD_QKEY };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/*
 * A UD QP receiving from an SRQ: datagrams from a second UD QP of the same
 * device (to the device's own GID) land in the SRQ's WQEs in posting order,
 * after the 40-byte GRH, with the receiver's and the sender's QP numbers.
 */
static void ud_on_srq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_ah_attr *aa)
{
	enum { N = 3, LEN = 100, SLOT = 256, SEND_AT = 4096 };
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_send_sge = 1, .max_recv_wr = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *rq = NULL, *sq = NULL;
	struct ibv_srq *srq = NULL;
	struct ibv_ah *ah = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_cq *cq;
	uint8_t *buf = calloc(1, 2 * SEND_AT);
	int i, recvs = 0, sends = 0, good = 1;
	long deadline;

	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (buf)
		mr = ibv_reg_mr(pd, buf, 2 * SEND_AT, IBV_ACCESS_LOCAL_WRITE);
	srq = ibv_create_srq(pd, &si);
	qi.send_cq = qi.recv_cq = cq;
	sq = ibv_create_qp(pd, &qi);
	qi.srq = srq;
	qi.cap.max_recv_wr = 0;
	rq = srq ? ibv_create_qp(pd, &qi) : NULL;
	ah = ibv_create_ah(pd, aa);
	CHECK(cq && mr && srq && sq && rq && ah && !ud_to_rts(sq) && !ud_to_rts(rq),
	      "a UD QP on an SRQ and a UD sender on the same device");
	if (!(cq && mr && srq && sq && rq && ah))
		goto out;
	for (i = 0; i < N && good; i++) {
		struct ibv_sge g = { .addr = (uintptr_t)(buf + SLOT * i), .length = SLOT,
				     .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 500 + i, .sg_list = &g, .num_sge = 1 }, *bad;

		good = ibv_post_srq_recv(srq, &wr, &bad) == 0;
	}
	CHECK(good, "post %d receives to the SRQ", N);
	for (i = 0; i < N && good; i++) {
		struct ibv_sge g = { .addr = (uintptr_t)(buf + SEND_AT + LEN * i), .length = LEN,
				     .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 600 + i, .sg_list = &g, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		memset(buf + SEND_AT + LEN * i, 0x40 + i, LEN);
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = rq->qp_num;
		wr.wr.ud.remote_qkey = UD_QKEY;
		good = ibv_post_send(sq, &wr, &bad) == 0;
	}
	CHECK(good, "send %d datagrams of %d bytes to it", N, LEN);
	deadline = scaled_ms(10000);
	while (good && (recvs < N || sends < N) && deadline > 0) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n == 0) {
			usleep(1000);
			deadline--;
			continue;
		}
		if (n < 0 || wc.status != IBV_WC_SUCCESS) {
			printf("     (completion wr_id %llu status %d)\n",
			       (unsigned long long)wc.wr_id, n < 0 ? n : (int)wc.status);
			good = 0;
		} else if (wc.opcode == IBV_WC_SEND) {
			sends++;
		} else {
			good = wc.opcode == IBV_WC_RECV && wc.wr_id == 500u + recvs &&
			       wc.byte_len == 40 + LEN && wc.qp_num == rq->qp_num &&
			       wc.src_qp == sq->qp_num &&
			       !memcmp(buf + SLOT * recvs + 40, buf + SEND_AT + LEN * recvs, LEN);
			if (!good)
				printf("     (receive %d: wr_id %llu len %u qp %u src %u)\n", recvs,
				       (unsigned long long)wc.wr_id, wc.byte_len, wc.qp_num,
				       wc.src_qp);
			recvs++;
		}
	}
	CHECK(good && recvs == N && sends == N,
	      "each datagram in the next SRQ receive: order, GRH + length, QP numbers, bytes");
out:
	if (rq)
		ibv_destroy_qp(rq);
	if (sq)
		ibv_destroy_qp(sq);
	if (ah)
		ibv_destroy_ah(ah);
	if (srq)
		ibv_destroy_srq(srq);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	free(buf);
}

int main(int argc, char **argv)
{
	struct ibv_srq_init_attr sinit = { .attr = { .max_wr = 100, .max_sge = 2 } };
	struct ibv_qp_init_attr qinit = { 0 };
	struct ibv_device_attr dattr;
	struct ibv_srq_attr sa;
	struct ibv_ah_attr aa = { 0 };
	struct ibv_context *ctx;
	struct ibv_srq *srq, *bad;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah, *ah2;
	int gid_index;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX\n", argv[0]);
		return 2;
	}
	gid_index = atoi(argv[2]);
	ctx = open_device_by_name(argv[1]);
	if (!ctx || ibv_query_device(ctx, &dattr)) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq)
		return 1;

	srq = ibv_create_srq(pd, &sinit);
	CHECK(srq != NULL, "create an SRQ (errno %d)", srq ? 0 : errno);
	if (!srq)
		return 1;
	CHECK(sinit.attr.max_wr >= 100 && sinit.attr.max_sge >= 2,
	      "granted sizes cover the request (wr %u sge %u)", sinit.attr.max_wr, sinit.attr.max_sge);
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == sinit.attr.max_wr && sa.srq_limit == 0,
	      "query reports the sizes, limit 0");
	sa.srq_limit = 10;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "arm the limit at 10");
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 10, "query reports limit 10");
	sa.srq_limit = sinit.attr.max_wr + 1;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) != 0, "a limit above the size is refused");
	sa.max_wr = 200;
	sa.srq_limit = 10;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == 0, "resize to 200");
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr >= 200 && sa.srq_limit == 10,
	      "query reports the new size (%u) and the same limit", sa.max_wr);
	sa.max_wr = 5;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) != 0, "a size below the armed limit is refused");
	sa.max_wr = dattr.max_srq_wr + 1;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) != 0, "a size above max_srq_wr is refused");

	qinit.send_cq = cq;
	qinit.recv_cq = cq;
	qinit.srq = srq;
	qinit.qp_type = IBV_QPT_RC;
	qinit.cap.max_send_wr = 8;
	qinit.cap.max_send_sge = 1;
	qp = ibv_create_qp(pd, &qinit);
	CHECK(qp != NULL, "create an RC QP that receives from the SRQ (errno %d)", qp ? 0 : errno);
	CHECK(ibv_destroy_srq(srq) != 0, "the SRQ cannot be destroyed while a QP uses it");
	CHECK(qp && ibv_destroy_qp(qp) == 0, "destroy the QP");
	CHECK(ibv_destroy_srq(srq) == 0, "then destroy the SRQ");

	sinit.attr.max_wr = dattr.max_srq_wr + 1;
	errno = 0;
	bad = ibv_create_srq(pd, &sinit);
	CHECK(!bad && errno == EINVAL, "max_wr above max_srq_wr is EINVAL (errno %d)", errno);

	if (ibv_query_gid(ctx, 1, gid_index, &aa.grh.dgid))
		return 1;
	aa.is_global = 1;
	aa.grh.sgid_index = gid_index;
	aa.grh.hop_limit = 64;
	aa.port_num = 1;
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah != NULL, "create an AH to our own GID (errno %d)", ah ? 0 : errno);
	ah2 = ibv_create_ah(pd, &aa);
	CHECK(ah2 != NULL, "and a second one");
	CHECK(ah && ibv_destroy_ah(ah) == 0, "destroy the first");
	CHECK(ah2 && ibv_destroy_ah(ah2) == 0, "destroy the second");
	aa.is_global = 0;
	errno = 0;
	ah = ibv_create_ah(pd, &aa);
	CHECK(!ah, "an AH without a GRH is refused on RoCE (errno %d)", errno);

	aa.is_global = 1;
	ud_on_srq(ctx, pd, &aa);

	/* Left for close. */
	sinit.attr.max_wr = 16;
	srq = ibv_create_srq(pd, &sinit);
	aa.is_global = 1;
	ah = ibv_create_ah(pd, &aa);
	CHECK(srq && ah, "create an SRQ and an AH and leave them");
	CHECK(ibv_close_device(ctx) == 0, "close the device with them open");

	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
