// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_qp DEVICE GID_INDEX: queue pairs through the rxe provider library
 * (which maps each QP's send and receive rings): creation and the queue
 * sizes granted, the IBTA state machine with its required attributes,
 * query, bad values, and cleanup on close. One line per check; exits 0
 * only if all passed.
 */
#include "common.h"

static int to_init(struct ibv_qp *qp, int ud)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		.qkey = 0x11111111,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(qp, &a, mask);
}

static int rc_to_rtr(struct ibv_qp *qp, int gid_index, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = qp->qp_num,
		.rq_psn = 0x123456, .max_dest_rd_atomic = 4, .min_rnr_timer = 12,
	};
	union ibv_gid gid;

	if (ibv_query_gid(qp->context, 1, gid_index, &gid))
		return -1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int rc_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .sq_psn = 0x654321, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 4,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int set_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		return -1;
	return a.qp_state;
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_device_attr dattr;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_context *ctx;
	struct ibv_qp *rc, *ud, *bad, *left[4];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int gid_index, i, err;

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
	if (!pd || !cq) {
		fprintf(stderr, "PD/CQ: %s\n", strerror(errno));
		return 1;
	}

	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 16;
	init.cap.max_recv_wr = 32;
	init.cap.max_send_sge = 2;
	init.cap.max_recv_sge = 3;
	init.cap.max_inline_data = 64;
	rc = ibv_create_qp(pd, &init);
	CHECK(rc != NULL, "create an RC QP (errno %d)", rc ? 0 : errno);
	if (!rc)
		return 1;
	CHECK(rc->qp_num >= 16 && rc->qp_num < (1 << 24), "its number %u is a user QPN", rc->qp_num);
	CHECK(init.cap.max_send_wr >= 16 && init.cap.max_recv_wr >= 32 &&
	      init.cap.max_send_sge >= 2 && init.cap.max_recv_sge >= 3 &&
	      init.cap.max_inline_data >= 64,
	      "granted caps cover the request (wr %u/%u sge %u/%u inline %u)",
	      init.cap.max_send_wr, init.cap.max_recv_wr, init.cap.max_send_sge,
	      init.cap.max_recv_sge, init.cap.max_inline_data);
	CHECK(state_of(rc) == IBV_QPS_RESET, "a new QP is in RESET");

	CHECK(set_state(rc, IBV_QPS_RTR) != 0, "RESET -> RTR is refused");
	CHECK(set_state(rc, IBV_QPS_INIT) != 0, "RESET -> INIT without its required attributes is refused");
	CHECK(to_init(rc, 0) == 0, "RESET -> INIT");
	CHECK(state_of(rc) == IBV_QPS_INIT, "query says INIT");
	CHECK(set_state(rc, IBV_QPS_RTR) != 0, "INIT -> RTR without path, QPN and PSN is refused");
	CHECK(rc_to_rtr(rc, gid_index, IBV_MTU_4096) != 0, "a path MTU above the port's active MTU is refused");
	CHECK(rc_to_rtr(rc, gid_index, IBV_MTU_1024) == 0, "INIT -> RTR (loop to itself)");
	CHECK(rc_to_rts(rc) == 0, "RTR -> RTS");
	err = ibv_query_qp(rc, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN |
			   IBV_QP_DEST_QPN | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
			   IBV_QP_AV | IBV_QP_CAP, &qi);
	CHECK(!err && qa.qp_state == IBV_QPS_RTS && qa.sq_psn == 0x654321 &&
	      qa.rq_psn == 0x123456 && qa.dest_qp_num == rc->qp_num &&
	      qa.path_mtu == IBV_MTU_1024 && qa.timeout == 14 &&
	      qa.ah_attr.grh.sgid_index == gid_index && qi.cap.max_send_wr == init.cap.max_send_wr,
	      "query returns what was set");
	CHECK(set_state(rc, IBV_QPS_ERR) == 0 && state_of(rc) == IBV_QPS_ERR, "RTS -> ERR");
	CHECK(set_state(rc, IBV_QPS_RTS) != 0, "ERR -> RTS is refused");
	CHECK(set_state(rc, IBV_QPS_RESET) == 0 && state_of(rc) == IBV_QPS_RESET, "ERR -> RESET");
	CHECK(to_init(rc, 0) == 0 && rc_to_rtr(rc, gid_index, IBV_MTU_1024) == 0 &&
	      rc_to_rts(rc) == 0, "a reset QP connects again");
	CHECK(ibv_destroy_qp(rc) == 0, "destroy the RC QP");

	init.qp_type = IBV_QPT_UD;
	ud = ibv_create_qp(pd, &init);
	CHECK(ud != NULL, "create a UD QP");
	if (ud) {
		CHECK(to_init(ud, 1) == 0, "UD RESET -> INIT");
		CHECK(set_state(ud, IBV_QPS_RTR) == 0, "UD INIT -> RTR");
		qa.qp_state = IBV_QPS_RTS;
		qa.sq_psn = 7;
		CHECK(ibv_modify_qp(ud, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "UD RTR -> RTS");
		CHECK(ibv_destroy_qp(ud) == 0, "destroy the UD QP");
	}

	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = dattr.max_qp_wr + 1;
	errno = 0;
	bad = ibv_create_qp(pd, &init);
	CHECK(!bad && errno == EINVAL, "max_send_wr above max_qp_wr is EINVAL (errno %d)", errno);
	init.cap.max_send_wr = 16;
	init.cap.max_send_sge = dattr.max_sge + 1;
	errno = 0;
	bad = ibv_create_qp(pd, &init);
	CHECK(!bad && errno == EINVAL, "max_send_sge above max_sge is EINVAL (errno %d)", errno);
	init.cap.max_send_sge = 2;
	init.cap.max_inline_data = 4096;
	errno = 0;
	bad = ibv_create_qp(pd, &init);
	CHECK(!bad, "4096 bytes of inline data are refused (errno %d)", errno);
	init.cap.max_inline_data = 0;

	for (i = 0; i < 4; i++)
		left[i] = ibv_create_qp(pd, &init);
	CHECK(left[0] && left[1] && left[2] && left[3], "create 4 more QPs and leave them");
	CHECK(left[0] && left[1] && left[0]->qp_num != left[1]->qp_num, "QP numbers differ");
	if (left[3]) {
		/* A peer may still be resending to a destroyed QP's number. */
		uint32_t gone = left[3]->qp_num;

		CHECK(ibv_destroy_qp(left[3]) == 0, "destroy one of them");
		left[3] = ibv_create_qp(pd, &init);
		CHECK(left[3] && left[3]->qp_num != gone,
		      "the next QP does not take the number just freed (%u, got %u)", gone,
		      left[3] ? left[3]->qp_num : 0);
	}
	CHECK(ibv_close_device(ctx) == 0, "close the device with QPs, a CQ and a PD open");

	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
