// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_cq DEVICE: completion queues through the rxe provider library
 * (which maps each CQ's ring): sizes, limits, resize, notification
 * requests, completion channels, and cleanup on close. Prints one line per
 * check; exits 0 only if all passed.
 */
#include "common.h"

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	struct ibv_device_attr attr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *big, *left[8];
	struct ibv_wc wc[4];
	int i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	ctx = open_device_by_name(argv[1]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	if (ibv_query_device(ctx, &attr)) {
		perror("ibv_query_device");
		return 1;
	}

	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	CHECK(cq && cq->cqe >= 1, "create a 1-entry CQ (got %d entries)", cq ? cq->cqe : -1);
	CHECK(cq && ibv_poll_cq(cq, 4, wc) == 0, "a new CQ polls empty");
	CHECK(cq && ibv_req_notify_cq(cq, 0) == 0, "arm for the next completion");
	CHECK(cq && ibv_req_notify_cq(cq, 1) == 0, "arm for solicited completions");
	CHECK(cq && ibv_resize_cq(cq, 300) == 0 && cq->cqe >= 300,
	      "resize 1 -> 300 (got %d)", cq ? cq->cqe : -1);
	CHECK(cq && ibv_poll_cq(cq, 4, wc) == 0, "the resized CQ polls empty");
	CHECK(cq && ibv_resize_cq(cq, 20) == 0 && cq->cqe >= 20,
	      "resize 300 -> 20 (got %d)", cq ? cq->cqe : -1);
	CHECK(cq && ibv_resize_cq(cq, attr.max_cqe + 1) != 0,
	      "resize beyond max_cqe (%d) is refused", attr.max_cqe);
	CHECK(cq && ibv_poll_cq(cq, 4, wc) == 0, "still usable after a refused resize");
	CHECK(cq && ibv_destroy_cq(cq) == 0, "destroy");

	big = ibv_create_cq(ctx, attr.max_cqe, NULL, NULL, 0);
	CHECK(big && big->cqe >= attr.max_cqe, "create a max_cqe (%d) CQ", attr.max_cqe);
	CHECK(big && ibv_destroy_cq(big) == 0, "destroy it");

	errno = 0;
	cq = ibv_create_cq(ctx, attr.max_cqe + 1, NULL, NULL, 0);
	CHECK(!cq && errno == EINVAL, "max_cqe + 1 entries is EINVAL (errno %d)", errno);
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	cq = ibv_create_cq(ctx, 0, NULL, NULL, 0);
	CHECK(!cq, "0 entries is refused (errno %d)", errno);
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	cq = ibv_create_cq(ctx, 8, NULL, NULL, ctx->num_comp_vectors);
	CHECK(!cq, "a completion vector out of range is refused (errno %d)", errno);
	if (cq)
		ibv_destroy_cq(cq);

	ch = ibv_create_comp_channel(ctx);
	CHECK(ch != NULL, "create a completion channel");
	cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;
	CHECK(cq != NULL, "create a CQ on the channel");
	CHECK(cq && ibv_req_notify_cq(cq, 0) == 0, "arm it");
	CHECK(cq && ibv_destroy_cq(cq) == 0, "destroy it");
	CHECK(ch && ibv_destroy_comp_channel(ch) == 0, "destroy the channel");

	/* Left for ibv_close_device() to clean up. */
	for (i = 0; i < 8; i++)
		left[i] = ibv_create_cq(ctx, 64 << i, NULL, NULL, 0);
	for (i = 0; i < 8 && left[i]; i++)
		;
	CHECK(i == 8, "create 8 more CQs (64..8192 entries) and leave them");
	CHECK(ibv_close_device(ctx) == 0, "close the device with CQs open");

	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
