// SPDX-License-Identifier: GPL-2.0
/*
 * rc_idle DEV_A GID_A DEV_B GID_B IDLE_SECS: one RC QP pair (A -> B), a
 * burst of RDMA WRITEs, then IDLE_SECS with nothing posted (it prints
 * "idle qpn A B" first, so a test can change the paths meanwhile), then
 * another burst. Every WRITE's bytes are checked. Exit status 0 iff all
 * checks passed.
 */
#include <time.h>
#include <unistd.h>
#include "common.h"

#define LEN (64 * 1024)
#define BURST 16
#define TIMEOUT_MS 20000

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int gid_index;
	union ibv_gid gid;
	uint8_t *buf;
	struct ibv_mr *mr;
};

static int open_side(struct side *s, const char *dev, int gid_index)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = BURST, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	s->ctx = open_device_by_name(dev);
	if (!s->ctx)
		return -1;
	s->gid_index = gid_index;
	if (ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 2 * BURST, NULL, NULL, 0);
	if (!s->pd || !s->cq || posix_memalign((void **)&s->buf, 4096, BURST * LEN))
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BURST * LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	init.send_cq = init.recv_cq = s->cq;
	s->qp = s->mr ? ibv_create_qp(s->pd, &init) : NULL;
	if (!s->qp)
		return -1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

static int to_rts(struct side *s, struct side *peer, uint32_t psn, uint32_t peer_psn)
{
	return rc_connect(s->qp, s->gid_index, &peer->gid, peer->qp->qp_num, psn, peer_psn, 0);
}

/* BURST WRITEs of LEN bytes from A to B, each with its own pattern. */
static int burst(struct side *a, struct side *b, unsigned int seed)
{
	struct ibv_sge sg[BURST];
	struct ibv_send_wr wr[BURST], *bad;
	struct ibv_wc wc;
	int i, done = 0;
	long t0 = now_ms();

	for (i = 0; i < BURST * LEN; i++)
		a->buf[i] = (uint8_t)(seed * 131 + i * 7 + i / LEN);
	memset(b->buf, 0, BURST * LEN);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < BURST; i++) {
		sg[i] = (struct ibv_sge){ (uintptr_t)(a->buf + i * LEN), LEN, a->mr->lkey };
		wr[i].wr_id = i;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = (uintptr_t)(b->buf + i * LEN);
		wr[i].wr.rdma.rkey = b->mr->rkey;
		wr[i].next = i + 1 < BURST ? &wr[i + 1] : NULL;
	}
	if (ibv_post_send(a->qp, wr, &bad))
		return -1;
	while (done < BURST && now_ms() - t0 < TIMEOUT_MS) {
		int n = ibv_poll_cq(a->cq, 1, &wc);

		if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) {
			fprintf(stderr, "completion status %d\n", n < 0 ? -1 : (int)wc.status);
			return -1;
		}
		done += n;
	}
	return done == BURST && !memcmp(a->buf, b->buf, BURST * LEN) ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct side a = { 0 }, b = { 0 };

	if (argc != 6) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B IDLE_SECS\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK(!open_side(&a, argv[1], atoi(argv[2])) && !open_side(&b, argv[3], atoi(argv[4])),
	      "open %s and %s", argv[1], argv[3]);
	if (failures)
		return 1;
	CHECK(!to_rts(&a, &b, 0x100, 0x200) && !to_rts(&b, &a, 0x200, 0x100), "connect");
	CHECK(!burst(&a, &b, 1), "first burst of %d WRITEs arrived intact", BURST);
	printf("idle qpn %u %u\n", a.qp->qp_num, b.qp->qp_num);
	sleep(atoi(argv[5]));
	CHECK(!burst(&a, &b, 2), "second burst of %d WRITEs arrived intact", BURST);
	return failures ? 1 : 0;
}
