// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_flush DEVICE: receives posted to a QP (through the rxe provider
 * library, straight into the mapped ring) are completed with
 * IBV_WC_WR_FLUSH_ERR, in order, when the QP enters the error state, and
 * the completion event reaches the CQ's completion channel. One line per
 * check; exits 0 only if all passed.
 */
#include <poll.h>
#include "common.h"

#define NRECV 5

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = 0,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int set_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int post_recvs(struct ibv_qp *qp, uint64_t first, int n, void *buf, struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr ? mr->lkey : 0 };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	int i;

	for (i = 0; i < n; i++) {
		wr.wr_id = first + i;
		if (ibv_post_recv(qp, &wr, &bad))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_comp_channel *ch;
	struct ibv_context *ctx;
	struct ibv_cq *rcq, *scq, *evcq;
	struct ibv_wc wc[NRECV + 2];
	struct ibv_qp *qp;
	struct ibv_pd *pd;
	struct pollfd pfd;
	static char buf[64];
	void *evctx;
	int i, n, ok;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	ctx = open_device_by_name(argv[1]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	ch = ibv_create_comp_channel(ctx);
	rcq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;
	scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !rcq || !scq)
		return 1;
	init.send_cq = scq;
	init.recv_cq = rcq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = 8;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &init);
	if (!qp)
		return 1;

	CHECK(to_init(qp) == 0, "QP to INIT");
	/* Memory registration arrives with the data path; the lkey is not
	 * looked at when a receive is flushed. */
	CHECK(post_recvs(qp, 100, NRECV, buf, NULL) == 0, "post %d receives", NRECV);
	CHECK(ibv_poll_cq(rcq, NRECV + 2, wc) == 0, "nothing completes while the QP is healthy");
	CHECK(ibv_req_notify_cq(rcq, 0) == 0, "arm the receive CQ");
	CHECK(set_state(qp, IBV_QPS_ERR) == 0, "QP to ERR");

	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 5000) == 1, "the completion channel becomes readable");
	CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0 && evcq == rcq, "the event names the receive CQ");
	ibv_ack_cq_events(rcq, 1);

	n = ibv_poll_cq(rcq, NRECV + 2, wc);
	CHECK(n == NRECV, "%d completions for %d receives", n, NRECV);
	ok = n == NRECV;
	for (i = 0; i < n && i < NRECV; i++)
		ok = ok && wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].wr_id == 100 + (uint64_t)i &&
		     wc[i].opcode == IBV_WC_RECV && wc[i].qp_num == qp->qp_num;
	CHECK(ok, "each is a flush error for the right wr_id, in order, on our QP");
	CHECK(ibv_poll_cq(scq, NRECV, wc) == 0, "nothing on the send CQ (no sends were posted)");
	CHECK(set_state(qp, IBV_QPS_ERR) == 0 && ibv_poll_cq(rcq, NRECV, wc) == 0,
	      "staying in ERR flushes nothing twice");

	CHECK(set_state(qp, IBV_QPS_RESET) == 0 && to_init(qp) == 0, "ERR -> RESET -> INIT");
	CHECK(post_recvs(qp, 200, 3, buf, NULL) == 0, "post 3 more receives");
	CHECK(set_state(qp, IBV_QPS_ERR) == 0, "QP to ERR again");
	n = ibv_poll_cq(rcq, NRECV + 2, wc);
	CHECK(n == 3 && wc[0].wr_id == 200 && wc[2].wr_id == 202, "3 more flush completions (200..202)");
	CHECK(ibv_destroy_qp(qp) == 0, "destroy the QP");
	CHECK(ibv_close_device(ctx) == 0, "close");

	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
