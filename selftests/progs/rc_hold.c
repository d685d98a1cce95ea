// SPDX-License-Identifier: GPL-2.0
/*
 * rc_hold DEV_A GID_A DEV_B GID_B LEN CTL_DIR: one live RC QP pair for a
 * test that sends forged packets at it. B reads LEN bytes from A's buffer
 * (RDMA READ, the first request on B's QP) and checks them, then prints
 *   "read qpn_a=N qpn_b=N psn=N va=0x.. rkey=0x.. len=N"
 * (A's QPN, B's QPN, the READ's first PSN, and what it read), so that the
 * test can forge duplicates of that READ. It then waits for CTL_DIR/check:
 * B reads the buffer again (new contents) and prints "check ok" or "check
 * failed"; then it waits for CTL_DIR/exit and destroys everything ("closed").
 * Exit status 0 iff all checks passed.
 */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define TIMEOUT_MS 60000
#define PSN_B 0x300
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)

/* B reads LEN bytes of A's buffer, filled with pattern SEED, and checks them. */
static int read_check(struct rc_side *a, struct rc_side *b, size_t len, unsigned int seed)
{
	struct ibv_sge sg = { (uintptr_t)b->buf, len, b->mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	long t0 = now_ms();
	size_t i;
	int n = 0;

	for (i = 0; i < len; i++)
		a->buf[i] = (uint8_t)(seed * 131 + i * 7 + i / 4096);
	memset(b->buf, 0, len);
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)a->buf;
	wr.wr.rdma.rkey = a->mr->rkey;
	if (ibv_post_send(b->qp, &wr, &bad))
		return -1;
	while (n == 0 && now_ms() - t0 < TIMEOUT_MS)
		n = ibv_poll_cq(b->cq, 1, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "READ completion: %d status %d\n", n, n == 1 ? (int)wc.status : -1);
		return -1;
	}
	return memcmp(a->buf, b->buf, len) ? -1 : 0;
}

/* Waits for DIR/NAME to exist. */
static void wait_file(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	while (stat(path, &st))
		usleep(50000);
}

int main(int argc, char **argv)
{
	struct rc_side a = { 0 }, b = { 0 };
	size_t len;
	int ok;

	if (argc != 7) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B LEN CTL_DIR\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	len = strtoul(argv[5], NULL, 0);
	CHECK(!rc_side_open(&a, argv[1], atoi(argv[2]), 4, len, ACCESS) &&
	      !rc_side_open(&b, argv[3], atoi(argv[4]), 4, len, ACCESS),
	      "open %s and %s", argv[1], argv[3]);
	if (failures)
		return 1;
	CHECK(!rc_connect(a.qp, a.gid_index, &b.gid, b.qp->qp_num, 0x100, PSN_B, 4) &&
	      !rc_connect(b.qp, b.gid_index, &a.gid, a.qp->qp_num, PSN_B, 0x100, 4), "connect");
	CHECK(!read_check(&a, &b, len, 1), "first READ of %zu bytes arrived intact", len);
	printf("read qpn_a=%u qpn_b=%u psn=%u va=%#lx rkey=%#x len=%zu\n", a.qp->qp_num,
	       b.qp->qp_num, PSN_B, (unsigned long)(uintptr_t)a.buf, a.mr->rkey, len);
	wait_file(argv[6], "check");
	ok = !read_check(&a, &b, len, 2);
	printf("check %s\n", ok ? "ok" : "failed");
	CHECK(ok, "second READ of %zu bytes arrived intact", len);
	wait_file(argv[6], "exit");
	rc_side_close(&b);
	rc_side_close(&a);
	printf("closed\n");
	return failures ? 1 : 0;
}
