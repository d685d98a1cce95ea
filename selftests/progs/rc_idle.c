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

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

#define LEN (64 * 1024)
#define BURST 16
#define TIMEOUT_MS 20000

/* BURST WRITEs of LEN bytes from A to B, each with its own pattern. */
static int burst(struct rc_side *a, struct rc_side *b, unsigned int seed)
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
	struct rc_side a = { 0 }, b = { 0 };

	if (argc != 6) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B IDLE_SECS\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK(!rc_side_open(&a, argv[1], atoi(argv[2]), BURST, BURST * LEN, ACCESS) &&
	      !rc_side_open(&b, argv[3], atoi(argv[4]), BURST, BURST * LEN, ACCESS),
	      "open %s and %s", argv[1], argv[3]);
	if (failures)
		return 1;
	CHECK(!rc_side_connect(&a, &b, 0x100, 0x200) && !rc_side_connect(&b, &a, 0x200, 0x100), "connect");
	CHECK(!burst(&a, &b, 1), "first burst of %d WRITEs arrived intact", BURST);
	printf("idle qpn %u %u\n", a.qp->qp_num, b.qp->qp_num);
	sleep(atoi(argv[5]));
	CHECK(!burst(&a, &b, 2), "second burst of %d WRITEs arrived intact", BURST);
	return failures ? 1 : 0;
}
