// SPDX-License-Identifier: GPL-2.0
/*
 * hostile_user MODE DEV GID_INDEX [SECONDS]: what an unprivileged process
 * can make the kernel do, bounded.
 *
 * cq-overrun: a UD QP whose send CQ has one entry gets many signaled
 *   sends: the CQ overruns. Exactly one IBV_EVENT_CQ_ERR and one
 *   IBV_EVENT_QP_FATAL arrive and the QP is in ERR; then the process keeps
 *   posting for SECONDS (each post completes flushed into the overrun CQ)
 *   and no further event arrives.
 * ring-spin: a second thread keeps the UD QP's send ring full by writing
 *   its producer index in the mapped ring for SECONDS, while the main
 *   thread moves the QP to ERR (which flushes the ring) and queries it:
 *   both return although the index never stops moving (the kernel's loops
 *   over the ring are bounded when they start, then yield).
 * srq-spin: an RC QP whose receives come from an SRQ gets SENDs from a
 *   second QP (RNR retries forever) while a thread keeps the SRQ's ring
 *   full of receive WQEs that do not parse: every SEND retires a bounded
 *   number of them in error and is answered "not ready"; destroying the
 *   receiving QP returns although the index never stops moving.
 * ring-limit: run with a low RLIMIT_MEMLOCK and without CAP_IPC_LOCK:
 *   creating QPs with large queues stops with ENOMEM (the queues count as
 *   the process's pinned memory), and destroying them gives it back.
 *
 * One line per check; "all checks passed" and exit 0 only if all passed.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_user_rxe.h>
#include <sys/resource.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

#define QKEY 0x11111111

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_ah *ah;
static int gid_index;
static union ibv_gid gid;

static struct ibv_qp *ud_qp(struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
			    uint32_t depth)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = depth, .max_recv_wr = srq ? 0 : 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return NULL;
	return qp;
}

/* A signaled 64-byte UD send to QP 1 of our own GID (QP1 drops it). */
static int post_one(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = 0xfffff0, .remote_qkey = QKEY },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/* Async events arriving within ms milliseconds, counted by type. */
static void count_events(int ms, int *cq_err, int *qp_fatal, int *other)
{
	long end = now_ms() + ms;
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	for (;;) {
		long left = end - now_ms();

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		while (!ibv_get_async_event(ctx, &ev)) {
			if (ev.event_type == IBV_EVENT_CQ_ERR)
				(*cq_err)++;
			else if (ev.event_type == IBV_EVENT_QP_FATAL)
				(*qp_fatal)++;
			else
				(*other)++;
			ibv_ack_async_event(&ev);
		}
	}
}

static void cq_overrun(int seconds)
{
	struct ibv_cq *scq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *qp;
	int cq_err = 0, qp_fatal = 0, other = 0, i, posted = 0, refused = 0;
	long end;

	CHECK(scq && rcq && mr, "CQ of %d entries, MR", scq ? scq->cqe : -1);
	if (!scq || !rcq || !mr)
		return;
	qp = ud_qp(scq, rcq, NULL, 32);
	CHECK(qp != NULL, "UD QP in RTS");
	if (!qp)
		return;
	for (i = 0; i < 32; i++)
		if (!post_one(qp, mr, i))
			posted++;
	count_events(3000, &cq_err, &qp_fatal, &other);
	CHECK(cq_err == 1, "one CQ error event for the overrun (got %d)", cq_err);
	CHECK(qp_fatal == 1, "one QP fatal event (got %d)", qp_fatal);
	CHECK(qp_state(qp) == IBV_QPS_ERR, "the QP is in ERR after its CQ overran");

	/* Work posted now completes flushed into the overrun CQ: dropped. */
	cq_err = qp_fatal = 0;
	end = now_ms() + seconds * 1000L;
	posted = 0;
	while (now_ms() < end) {
		if (post_one(qp, mr, posted))
			refused++;
		else
			posted++;
	}
	count_events(1000, &cq_err, &qp_fatal, &other);
	printf("# %d sends posted to the QP in ERR in %d s (%d refused)\n", posted, seconds,
	       refused);
	CHECK(posted > 0, "posting to the QP in ERR still works");
	CHECK(cq_err == 0 && qp_fatal == 0,
	      "no more events while completions are dropped (got %d CQ, %d QP)", cq_err, qp_fatal);
	CHECK(other == 0, "no other async events (got %d)", other);
	CHECK(!ibv_destroy_qp(qp), "destroy the QP");
	CHECK(!ibv_destroy_cq(scq) && !ibv_destroy_cq(rcq), "destroy the CQs");
	ibv_dereg_mr(mr);
}

/* ------------------------------------------------------------ ring-spin */

static volatile int spin_stop;
static volatile long spins;
static int spin_seconds;

/* Keeps the ring full: the producer index one slot behind the consumer's. */
static void *spin(void *arg)
{
	struct ring_hdr *r = arg;
	long end = now_ms() + spin_seconds * 1000L;

	while (!spin_stop && now_ms() < end) {
		uint32_t c = __atomic_load_n(&r->consumer_index, __ATOMIC_ACQUIRE);

		__atomic_store_n(&r->producer_index, (c + r->index_mask) & r->index_mask,
				 __ATOMIC_RELEASE);
		spins++;
	}
	return NULL;
}

static void ring_spin(int seconds)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct mapping before[64];
	struct ring_hdr *ring = NULL;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[64];
	int nb, i, done = 0;
	pthread_t t;
	long t0, t1;
	enum ibv_qp_state st;
	struct ibv_qp *qp;

	CHECK(cq && srq && mr, "CQ, SRQ, MR");
	if (!cq || !srq || !mr)
		return;
	nb = uverbs_maps(before, 64);
	/* With an SRQ the QP maps one ring of its own: the send ring. */
	qp = ud_qp(cq, cq, srq, 64);
	CHECK(qp != NULL, "UD QP in RTS");
	if (!qp)
		return;
	ring = new_ring(before, nb);
	CHECK(ring != NULL, "found the send ring's mapping");
	if (!ring)
		return;
	/* Every slot once holds a valid send, so a replayed slot is sent. */
	for (i = 0; i <= (int)ring->index_mask; i++) {
		while (post_one(qp, mr, i))
			ibv_poll_cq(cq, 64, wc);
		ibv_poll_cq(cq, 64, wc);
	}
	spin_seconds = seconds;
	if (pthread_create(&t, NULL, spin, ring)) {
		CHECK(0, "start the spinning thread");
		return;
	}
	usleep(500 * 1000);
	t0 = now_ms();
	done = !ibv_modify_qp(qp, &a, IBV_QP_STATE);
	st = qp_state(qp);
	t1 = now_ms();
	printf("# modify to ERR and query took %ld ms while the ring index kept moving\n",
	       t1 - t0);
	CHECK(done && st == IBV_QPS_ERR, "the QP moved to ERR");
	/*
	 * A liveness bound, not a timing: the spinner stops by itself after
	 * SECONDS; returning only then would mean the kernel waited for it.
	 */
	CHECK(!spin_stop && t1 - t0 < seconds * 1000L / 2,
	      "modify and query returned while the index kept moving");
	spin_stop = 1;
	pthread_join(t, NULL);
	printf("# the spinner wrote the producer index %ld times\n", (long)spins);
	CHECK(!ibv_destroy_qp(qp), "destroy the QP");
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
}

/* ------------------------------------------------------------- srq-spin */

static struct ibv_qp *rc_qp(struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = srq ? 0 : 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (qp && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

/* Keeps the SRQ's ring full of WQEs claiming more SGEs than it allows. */
static void *spin_garbage(void *arg)
{
	struct ring_hdr *r = arg;
	long end = now_ms() + spin_seconds * 1000L;
	uint32_t i;

	while (!spin_stop && now_ms() < end) {
		uint32_t c = __atomic_load_n(&r->consumer_index, __ATOMIC_ACQUIRE);

		for (i = 0; i <= r->index_mask; i++) {
			struct rxe_recv_wqe *w = ring_slot(r, i);

			w->wr_id = 0x5a5a0000 + i;
			w->dma.num_sge = 0x10000;
		}
		__atomic_store_n(&r->producer_index, (c + r->index_mask) & r->index_mask,
				 __ATOMIC_RELEASE);
		spins++;
	}
	return NULL;
}

static void srq_spin(int seconds)
{
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct mapping before[64];
	struct ibv_srq *srq;
	struct ring_hdr *ring;
	struct ibv_qp *sender, *receiver;
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	struct ibv_wc wc[64];
	long errors = 0, others = 0, t0, t1, end;
	pthread_t t;
	int i, n, destroyed;

	CHECK(scq && rcq && mr, "CQs, MR");
	if (!scq || !rcq || !mr)
		return;
	sge.lkey = mr->lkey;
	n = uverbs_maps(before, 64);
	srq = ibv_create_srq(pd, &sa);
	ring = srq ? new_ring(before, n) : NULL;
	CHECK(ring != NULL, "SRQ of %u WRs and its ring's mapping", sa.attr.max_wr);
	if (!ring)
		return;
	sender = rc_qp(scq, NULL);
	receiver = rc_qp(rcq, srq);
	CHECK(sender && receiver, "two RC QPs");
	if (!sender || !receiver)
		return;
	CHECK(!rc_connect(sender, gid_index, &gid, receiver->qp_num, 1, 1, 1) &&
	      !rc_connect(receiver, gid_index, &gid, sender->qp_num, 1, 1, 1),
	      "connected to each other over GID %d", gid_index);
	spin_seconds = seconds;
	if (pthread_create(&t, NULL, spin_garbage, ring)) {
		CHECK(0, "start the spinning thread");
		return;
	}
	/* SENDs that find no usable receive: RNR NAKs, retried forever. */
	for (i = 0; i < 8; i++)
		ibv_post_send(sender, &wr, &bad);
	/*
	 * Drain the CQ now and then, not in a busy loop: on a small machine
	 * the spinner must keep its CPU to stay ahead of the kernel.
	 */
	end = now_ms() + seconds * 1000L / 4;
	while (now_ms() < end) {
		usleep(5000);
		while ((n = ibv_poll_cq(rcq, 64, wc)) > 0)
			for (i = 0; i < n; i++) {
				if (wc[i].status == IBV_WC_LOC_QP_OP_ERR &&
				    (wc[i].wr_id >> 16) == 0x5a5a)
					errors++;
				else
					others++;
			}
	}
	printf("# %ld receive WQEs retired in error in %d ms, %ld other completions\n", errors,
	       seconds * 1000 / 4, others);
	CHECK(errors > 0, "WQEs that do not parse complete with IBV_WC_LOC_QP_OP_ERR");
	CHECK(others == 0, "no other receive completions");
	t0 = now_ms();
	destroyed = !ibv_destroy_qp(receiver);
	t1 = now_ms();
	printf("# destroying the receiving QP took %ld ms while the SRQ index kept moving\n",
	       t1 - t0);
	/* A liveness bound, as in ring-spin: the spinner stops by itself. */
	CHECK(destroyed && !spin_stop && t1 - t0 < seconds * 1000L / 2,
	      "the receiving QP was destroyed while the index kept moving");
	spin_stop = 1;
	pthread_join(t, NULL);
	printf("# the spinner refilled the ring %ld times\n", (long)spins);
	CHECK(!ibv_destroy_qp(sender), "destroy the sending QP");
	CHECK(!ibv_destroy_srq(srq), "destroy the SRQ");
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_dereg_mr(mr);
}

/* ----------------------------------------------------------- ring-limit */

/*
 * Queues the process has mapped count as its pinned memory: with
 * RLIMIT_MEMLOCK low (and no CAP_IPC_LOCK), creating QPs with large queues
 * stops with ENOMEM, and destroying them gives the memory back.
 */
static void ring_limit(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1024, .max_recv_wr = 1024, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qps[256], *again;
	struct rlimit rl;
	int n, err = 0, i;

	getrlimit(RLIMIT_MEMLOCK, &rl);
	CHECK(cq != NULL, "CQ (RLIMIT_MEMLOCK %lu KiB)", (unsigned long)rl.rlim_cur / 1024);
	if (!cq)
		return;
	ia.send_cq = ia.recv_cq = cq;
	for (n = 0; n < 256; n++) {
		qps[n] = ibv_create_qp(pd, &ia);
		if (!qps[n]) {
			err = errno;
			break;
		}
	}
	printf("# %d QPs of 1024+1024 WRs created, then: %s\n", n, strerror(err));
	CHECK(n >= 1 && n < 256 && err == ENOMEM,
	      "QP creation stops with ENOMEM at the memlock limit (after %d)", n);
	for (i = 0; i < n; i++)
		ibv_destroy_qp(qps[i]);
	again = ibv_create_qp(pd, &ia);
	CHECK(again != NULL, "after destroying them a QP can be created again");
	if (again)
		ibv_destroy_qp(again);
	ibv_destroy_cq(cq);
}

int main(int argc, char **argv)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	int seconds = argc > 4 ? atoi(argv[4]) : 5;

	if (argc < 4) {
		fprintf(stderr, "usage: %s cq-overrun|ring-spin|srq-spin|ring-limit DEV GID_INDEX [SECONDS]\n",
			argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = open_device_by_name(argv[2]);
	gid_index = atoi(argv[3]);
	if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid)) {
		printf("FAIL open %s and its GID %d\n", argv[2], gid_index);
		return 1;
	}
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	pd = ibv_alloc_pd(ctx);
	aa.grh.dgid = gid;
	aa.grh.sgid_index = gid_index;
	aa.grh.hop_limit = 64;
	ah = pd ? ibv_create_ah(pd, &aa) : NULL;
	if (!ah) {
		printf("FAIL PD and AH\n");
		return 1;
	}
	if (!strcmp(argv[1], "cq-overrun"))
		cq_overrun(seconds);
	else if (!strcmp(argv[1], "ring-spin"))
		ring_spin(seconds);
	else if (!strcmp(argv[1], "srq-spin"))
		srq_spin(seconds);
	else if (!strcmp(argv[1], "ring-limit"))
		ring_limit();
	else
		CHECK(0, "unknown mode %s", argv[1]);
	ibv_destroy_ah(ah);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	if (failures) {
		printf("FAILED: %d checks\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
