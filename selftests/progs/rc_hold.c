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

static int open_side(struct side *s, const char *dev, int gid_index, size_t len)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	s->ctx = open_device_by_name(dev);
	if (!s->ctx)
		return -1;
	s->gid_index = gid_index;
	if (ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 8, NULL, NULL, 0);
	if (!s->pd || !s->cq || posix_memalign((void **)&s->buf, 4096, len))
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	init.send_cq = init.recv_cq = s->cq;
	s->qp = s->mr ? ibv_create_qp(s->pd, &init) : NULL;
	if (!s->qp)
		return -1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

static void close_side(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

/* B reads LEN bytes of A's buffer, filled with pattern SEED, and checks them. */
static int read_check(struct side *a, struct side *b, size_t len, unsigned int seed)
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
	struct side a = { 0 }, b = { 0 };
	size_t len;
	int ok;

	if (argc != 7) {
		fprintf(stderr, "usage: %s DEV_A GID_A DEV_B GID_B LEN CTL_DIR\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	len = strtoul(argv[5], NULL, 0);
	CHECK(!open_side(&a, argv[1], atoi(argv[2]), len) &&
	      !open_side(&b, argv[3], atoi(argv[4]), len), "open %s and %s", argv[1], argv[3]);
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
	close_side(&b);
	close_side(&a);
	printf("closed\n");
	return failures ? 1 : 0;
}
