// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_srq_ah DEVICE GID_INDEX: shared receive queues and address handles
 * through the rxe provider library: sizes and limits, the SRQ limit, a QP
 * receiving from an SRQ, the core refusing to destroy an SRQ in use, and
 * AH create/query/destroy. One line per check; exits 0 only if all passed.
 */
#include "common.h"

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
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) != 0, "resizing is refused (not supported)");

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
