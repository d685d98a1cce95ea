// SPDX-License-Identifier: GPL-2.0
/*
 * rc_tail DEV_A GID_A DEV_B GID_B N PAUSE_SECS: one RC QP pair (A -> B),
 * N unsignaled RDMA WRITEs of 64 bytes posted at once, PAUSE_SECS with
 * nothing posted (it prints "paused" first), then one signaled WRITE.
 * Every WRITE's bytes are checked. A requester that lets unsignaled
 * messages share an ACK must still have those N acknowledged while
 * nothing follows them: a test reads its counters during the pause.
 * Exit status 0 iff all checks passed.
 */
#include <unistd.h>
#include "common.h"

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

#define LEN 64
#define MAX_N 64

/* WRITEs first..first+n-1 (slot i of A's buffer to slot i of B's). */
static int post_writes(struct rc_side *a, struct rc_side *b, int first, int n, int signal_last)
{
	struct ibv_sge sg[MAX_N + 1];
	struct ibv_send_wr wr[MAX_N + 1], *bad;
	int i;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		int k = first + i;

		sg[i] = (struct ibv_sge){ (uintptr_t)(a->buf + k * LEN), LEN, a->mr->lkey };
		wr[i].wr_id = k;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = signal_last && i == n - 1 ? IBV_SEND_SIGNALED : 0;
		wr[i].wr.rdma.remote_addr = (uintptr_t)(b->buf + k * LEN);
		wr[i].wr.rdma.rkey = b->mr->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return ibv_post_send(a->qp, wr, &bad);
}

int main(int argc, char **argv)
{
	struct rc_side a = { 0 }, b = { 0 };
	struct ibv_wc wc;
	int i, n;

	if (argc != 7) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B N PAUSE_SECS\n", argv[0]);
		return 2;
	}
	n = atoi(argv[5]);
	if (n < 1 || n > MAX_N) {
		fprintf(stderr, "N must be 1..%d\n", MAX_N);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK(!rc_side_open(&a, argv[1], atoi(argv[2]), 2 * MAX_N, (MAX_N + 1) * LEN, ACCESS) &&
	      !rc_side_open(&b, argv[3], atoi(argv[4]), 2 * MAX_N, (MAX_N + 1) * LEN, ACCESS),
	      "open %s and %s", argv[1], argv[3]);
	if (failures)
		return 1;
	CHECK(!rc_side_connect(&a, &b, 0x100, 0x200) && !rc_side_connect(&b, &a, 0x200, 0x100), "connect");
	for (i = 0; i < (MAX_N + 1) * LEN; i++)
		a.buf[i] = (uint8_t)(i * 7 + i / LEN + 1);
	memset(b.buf, 0, (MAX_N + 1) * LEN);
	CHECK(!post_writes(&a, &b, 0, n, 0), "post %d unsignaled WRITEs", n);
	printf("paused\n");
	sleep(atoi(argv[6]));
	CHECK(!post_writes(&a, &b, n, 1, 1), "post a signaled WRITE");
	CHECK(poll_cq_within(a.cq, &wc, scaled_ms(10000)) && wc.status == IBV_WC_SUCCESS &&
	      wc.wr_id == (uint64_t)n, "only the signaled WRITE completes, successfully");
	CHECK(!memcmp(a.buf, b.buf, (n + 1) * LEN), "all %d WRITEs arrived intact", n + 1);
	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
