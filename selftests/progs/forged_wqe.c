// SPDX-License-Identifier: GPL-2.0
/*
 * forged_wqe DEV GID_INDEX: work requests a process writes into its own
 * send ring (the ring is mapped writable; a provider library is only a
 * convention) and the kernel must not trust. QPs of one device, looped
 * back through the host.
 *
 *   - a UD send carrying its own address vector with a forged source
 *     address: the datagram arrives from the device's own GID, never from
 *     the forged one;
 *   - a UD send through an address handle of another protection domain:
 *     it completes with an error and nothing is sent;
 *   - an RC WQE with an invalid opcode: it completes with
 *     IBV_WC_LOC_QP_OP_ERR (its own error, not a flush), the work request
 *     after it flushes.
 *
 * One line per check; "all checks passed" and exit 0 only if all passed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_user_rxe.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define QKEY 0x22222222
#define MSG 64
#define GRH 40

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static int gid_index;
static union ibv_gid gid;
static uint8_t buf[8192];
static struct ibv_mr *mr;

static int ud_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* Completions of cq until n arrived or 5 s passed; returns how many. */
static int wait_wcs(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r > 0)
			got += r;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			break;
		if (r <= 0)
			usleep(1000);
	}
	return got;
}

/* Writes wqe into the next slot of ring and publishes it (no doorbell). */
static void forge(struct ring_hdr *ring, const void *wqe, size_t len)
{
	uint32_t p = __atomic_load_n(&ring->producer_index, __ATOMIC_ACQUIRE);
	void *slot = ring_slot(ring, p);

	memset(slot, 0, (size_t)1 << ring->log2_elem_size);
	memcpy(slot, wqe, len);
	__atomic_store_n(&ring->producer_index, (p + 1) & ring->index_mask, __ATOMIC_RELEASE);
}

static int send_via(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = QKEY },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static void ud_cases(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr ib = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr ia = ib;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_qp *a, *b;
	struct ibv_ah *ah, *ah2;
	struct mapping before[64];
	struct ring_hdr *ring;
	struct rxe_send_wqe w;
	struct ibv_wc wc[8];
	int nb, i, n, forged_done = 0, recvd = 0, from_own = 0;
	int v4 = IN6_IS_ADDR_V4MAPPED((struct in6_addr *)gid.raw);

	b = cq ? ibv_create_qp(pd, &ib) : NULL;
	CHECK(b && srq && pd2 && !ud_to_rts(b), "receiving UD QP");
	if (!b || !srq || !pd2)
		return;
	for (i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf + 4096 + i * 256,
				       .length = GRH + MSG, .lkey = mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		ibv_post_recv(b, &rw, &bad);
	}
	ia.srq = srq;
	ia.cap.max_recv_wr = 0;
	nb = uverbs_maps(before, 64);
	a = ibv_create_qp(pd, &ia);
	ring = a ? new_ring(before, nb) : NULL;
	CHECK(a && ring && !ud_to_rts(a), "sending UD QP and its send ring");
	if (!a || !ring)
		return;
	aa.grh.dgid = gid;
	aa.grh.sgid_index = gid_index;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(pd, &aa);
	ah2 = ibv_create_ah(pd2, &aa);
	CHECK(ah && ah2, "address handles in two PDs");
	if (!ah || !ah2)
		return;

	/* A send with its own address vector and a forged source address. */
	memset(&w, 0, sizeof(w));
	w.wr.wr_id = 100;
	w.wr.opcode = IBV_WR_SEND;
	w.wr.send_flags = IBV_SEND_SIGNALED;
	w.wr.wr.ud.remote_qpn = b->qp_num;
	w.wr.wr.ud.remote_qkey = QKEY;
	w.wr.wr.ud.av.port_num = 1;
	w.wr.wr.ud.av.network_type = v4 ? RXE_NETWORK_TYPE_IPV4 : RXE_NETWORK_TYPE_IPV6;
	memcpy(w.wr.wr.ud.av.grh.dgid.raw, gid.raw, 16);
	w.wr.wr.ud.av.grh.sgid_index = gid_index;
	w.wr.wr.ud.av.grh.hop_limit = 64;
	if (v4) {
		w.wr.wr.ud.av.sgid_addr._sockaddr_in.sin_family = AF_INET;
		inet_pton(AF_INET, "10.66.66.66", &w.wr.wr.ud.av.sgid_addr._sockaddr_in.sin_addr);
		w.wr.wr.ud.av.dgid_addr._sockaddr_in.sin_family = AF_INET;
		memcpy(&w.wr.wr.ud.av.dgid_addr._sockaddr_in.sin_addr, gid.raw + 12, 4);
	} else {
		w.wr.wr.ud.av.sgid_addr._sockaddr_in6.sin6_family = AF_INET6;
		inet_pton(AF_INET6, "2001:db8::666", &w.wr.wr.ud.av.sgid_addr._sockaddr_in6.sin6_addr);
		w.wr.wr.ud.av.dgid_addr._sockaddr_in6.sin6_family = AF_INET6;
		memcpy(&w.wr.wr.ud.av.dgid_addr._sockaddr_in6.sin6_addr, gid.raw, 16);
	}
	w.dma.length = MSG;
	w.dma.resid = MSG;
	w.dma.num_sge = 1;
	{
		uint8_t slot[sizeof(w) + sizeof(struct rxe_sge)];
		struct rxe_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };

		memcpy(slot, &w, sizeof(w));
		memcpy(slot + sizeof(w), &sge, sizeof(sge));
		forge(ring, slot, sizeof(slot));
	}
	/* The provider's next post rings the doorbell for both. */
	CHECK(!send_via(a, ah, b->qp_num, 101), "a send behind the forged one");
	n = wait_wcs(cq, wc, 4);
	for (i = 0; i < n; i++) {
		if (wc[i].wr_id == 100) {
			forged_done = 1;
			printf("# forged WQE completed with status %d (%s)\n", wc[i].status,
			       ibv_wc_status_str(wc[i].status));
		} else if (wc[i].wr_id >= 1000 && wc[i].status == IBV_WC_SUCCESS) {
			const uint8_t *grh = buf + 4096 + (wc[i].wr_id - 1000) * 256;

			recvd++;
			/* RoCE v2 receive buffers start with the IP header (IPv4
			 * at byte 20, its source at 12) or a GRH (source at 8).
			 */
			if (v4 ? !memcmp(grh + 20 + 12, gid.raw + 12, 4)
			       : !memcmp(grh + 8, gid.raw, 16))
				from_own++;
		}
	}
	CHECK(forged_done, "the forged WQE was taken and completed");
	CHECK(recvd >= 1 && from_own == recvd,
	      "every datagram arrived from the device's own address (%d of %d)", from_own,
	      recvd);

	/* An address handle of another PD: refused, nothing sent. */
	CHECK(!send_via(a, ah2, b->qp_num, 200), "post through another PD's AH");
	n = wait_wcs(cq, wc, 1);
	CHECK(n == 1 && wc[0].wr_id == 200 && wc[0].status != IBV_WC_SUCCESS,
	      "a send through another PD's AH fails (status %s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	n = wait_wcs(cq, wc, 1);
	CHECK(n == 0, "nothing arrived through the other PD's AH");

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_destroy_ah(ah);
	ibv_destroy_ah(ah2);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd2);
}

static void rc_bad_opcode(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr id = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr ic = id;
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	struct mapping before[64];
	struct ring_hdr *ring;
	struct rxe_send_wqe w;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 301, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc[4];
	struct ibv_qp *c, *d;
	int nb, n;

	d = cq ? ibv_create_qp(pd, &id) : NULL;
	ic.srq = srq;
	ic.cap.max_recv_wr = 0;
	nb = uverbs_maps(before, 64);
	c = srq ? ibv_create_qp(pd, &ic) : NULL;
	ring = c ? new_ring(before, nb) : NULL;
	CHECK(c && d && ring, "two RC QPs, the send ring of one");
	if (!c || !d || !ring)
		return;
	CHECK(!ibv_modify_qp(c, &init, mask) && !ibv_modify_qp(d, &init, mask) &&
	      !rc_connect(c, gid_index, &gid, d->qp_num, 1, 1, 1) &&
	      !rc_connect(d, gid_index, &gid, c->qp_num, 1, 1, 1),
	      "connected to each other");
	memset(&w, 0, sizeof(w));
	w.wr.wr_id = 300;
	w.wr.opcode = 0x7f; /* no such operation */
	w.wr.send_flags = IBV_SEND_SIGNALED;
	forge(ring, &w, sizeof(w));
	CHECK(!ibv_post_send(c, &wr, &bad), "a send behind the forged WQE");
	n = wait_wcs(cq, wc, 2);
	CHECK(n == 2, "two completions (got %d)", n);
	if (n == 2) {
		CHECK(wc[0].wr_id == 300 && wc[0].status == IBV_WC_LOC_QP_OP_ERR,
		      "the malformed WQE completes with its own error (wr_id %llu, %s)",
		      (unsigned long long)wc[0].wr_id, ibv_wc_status_str(wc[0].status));
		CHECK(wc[1].wr_id == 301 && wc[1].status == IBV_WC_WR_FLUSH_ERR,
		      "the one after it flushes (wr_id %llu, %s)",
		      (unsigned long long)wc[1].wr_id, ibv_wc_status_str(wc[1].status));
	}
	ibv_destroy_qp(c);
	ibv_destroy_qp(d);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DEV GID_INDEX\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = open_device_by_name(argv[1]);
	gid_index = atoi(argv[2]);
	if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid)) {
		printf("FAIL open %s and its GID %d\n", argv[1], gid_index);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr) {
		printf("FAIL PD and MR\n");
		return 1;
	}
	ud_cases();
	rc_bad_opcode();
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	if (failures) {
		printf("FAILED: %d checks\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
