// SPDX-License-Identifier: GPL-2.0
/*
 * mpi_check [ROUNDS]: collectives whose results every rank checks.
 *
 * Each round: MPI_Allreduce (sum and max) of vectors of several lengths
 * whose elements depend on the rank, the index and the round; MPI_Alltoall
 * and MPI_Alltoallv of rank-tagged blocks (every rank receives exactly
 * what each peer addressed to it); MPI_Bcast of a large buffer from a
 * rotating root; a ring of MPI_Sendrecv. Rank 0 prints
 * "mpi_check: N ranks, R rounds, all checks passed" only if every check on
 * every rank passed; the exit status is 0 then, 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

static void check(int ok, const char *what, int round, long idx)
{
	if (!ok && failures++ < 10)
		fprintf(stderr, "rank %d: FAIL %s (round %d, index %ld)\n", rank, what, round, idx);
}

static int64_t value(int r, long i, int round)
{
	return (int64_t)r * 1000003 + i * 7 + round;
}

static void allreduce(int round, long n)
{
	int64_t *in = malloc(n * sizeof(*in)), *sum = malloc(n * sizeof(*sum)),
		*max = malloc(n * sizeof(*max));

	for (long i = 0; i < n; i++)
		in[i] = value(rank, i, round);
	MPI_Allreduce(in, sum, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(in, max, n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
	for (long i = 0; i < n; i++) {
		int64_t want = 0;

		for (int r = 0; r < size; r++)
			want += value(r, i, round);
		check(sum[i] == want, "allreduce sum", round, i);
		check(max[i] == value(size - 1, i, round), "allreduce max", round, i);
	}
	free(in);
	free(sum);
	free(max);
}

/* The word rank `from` sends rank `to` at position i. */
static uint32_t tag(int from, int to, long i, int round)
{
	return (uint32_t)from << 24 ^ (uint32_t)to << 16 ^ (uint32_t)(i * 2654435761u) ^ (uint32_t)round;
}

static void alltoall(int round, long per)
{
	uint32_t *out = malloc(per * size * sizeof(*out)), *in = malloc(per * size * sizeof(*in));

	for (int to = 0; to < size; to++)
		for (long i = 0; i < per; i++)
			out[to * per + i] = tag(rank, to, i, round);
	MPI_Alltoall(out, per, MPI_UINT32_T, in, per, MPI_UINT32_T, MPI_COMM_WORLD);
	for (int from = 0; from < size; from++)
		for (long i = 0; i < per; i++)
			check(in[from * per + i] == tag(from, rank, i, round), "alltoall", round, from * per + i);
	free(out);
	free(in);
}

/* Alltoallv: rank r sends (r + to + 1) * unit words to rank `to`. */
static void alltoallv(int round, long unit)
{
	int *scount = malloc(size * sizeof(int)), *sdisp = malloc(size * sizeof(int));
	int *rcount = malloc(size * sizeof(int)), *rdisp = malloc(size * sizeof(int));
	long stotal = 0, rtotal = 0;

	for (int p = 0; p < size; p++) {
		scount[p] = (rank + p + 1) * unit;
		sdisp[p] = stotal;
		stotal += scount[p];
		rcount[p] = (p + rank + 1) * unit;
		rdisp[p] = rtotal;
		rtotal += rcount[p];
	}
	uint32_t *out = malloc(stotal * sizeof(*out)), *in = malloc(rtotal * sizeof(*in));

	for (int to = 0; to < size; to++)
		for (long i = 0; i < scount[to]; i++)
			out[sdisp[to] + i] = tag(rank, to, i, round);
	MPI_Alltoallv(out, scount, sdisp, MPI_UINT32_T, in, rcount, rdisp, MPI_UINT32_T, MPI_COMM_WORLD);
	for (int from = 0; from < size; from++)
		for (long i = 0; i < rcount[from]; i++)
			check(in[rdisp[from] + i] == tag(from, rank, i, round), "alltoallv", round, rdisp[from] + i);
	free(out);
	free(in);
	free(scount);
	free(sdisp);
	free(rcount);
	free(rdisp);
}

static void bcast(int round, long n)
{
	int root = round % size;
	uint8_t *buf = malloc(n);

	for (long i = 0; i < n; i++)
		buf[i] = rank == root ? (uint8_t)(i * 31 + round) : 0;
	MPI_Bcast(buf, n, MPI_BYTE, root, MPI_COMM_WORLD);
	for (long i = 0; i < n; i++)
		check(buf[i] == (uint8_t)(i * 31 + round), "bcast", round, i);
	free(buf);
}

static void ring(int round, long n)
{
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	uint32_t *out = malloc(n * sizeof(*out)), *in = malloc(n * sizeof(*in));

	for (long i = 0; i < n; i++)
		out[i] = tag(rank, next, i, round);
	MPI_Sendrecv(out, n, MPI_UINT32_T, next, round, in, n, MPI_UINT32_T, prev, round, MPI_COMM_WORLD,
		     MPI_STATUS_IGNORE);
	for (long i = 0; i < n; i++)
		check(in[i] == tag(prev, rank, i, round), "sendrecv ring", round, i);
	free(out);
	free(in);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3, total;
	static const long lengths[] = { 1, 100, 4096, 65536 };

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int round = 0; round < rounds; round++) {
		for (unsigned l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
			allreduce(round, lengths[l]);
		alltoall(round, 1);
		alltoall(round, 16384);
		alltoallv(round, 1000);
		bcast(round, 1 << 20);
		ring(round, 100000);
	}
	MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (total == 0)
			printf("mpi_check: %d ranks, %d rounds, all checks passed\n", size, rounds);
		else
			printf("mpi_check: %d failed checks\n", total);
	}
	MPI_Finalize();
	return total != 0;
}
