/* swing_mpi's compiled engine core: runs a plan's program (posts, waits, reductions) in one call.
 *
 * The Python side (swing_mpi/program.py) compiles a plan once into a flat int64 program and keeps the
 * pure-Python executor beside it, which gives the same bits. This file only interprets that program:
 *
 *   program  := nsteps, then per step: nls, then per lane-step:
 *               lane, npre, nmsg, napply, pre..., msg..., apply...
 *   pre      := dst_base, dst_off, src_base, src_off, nbytes                 (a copy before posting)
 *   msg      := kind (0 recv, 1 send), base, off, count, type, peer          (type 0: the element type)
 *   apply    := kind (0 copy, 1 reduce, 2 first, 3 copy back), dst_base, dst_off, a_base, a_off, b_base, b_off,
 *               nbytes, peer_first, ndeps, dep...                            (deps: msg indices in the lane-step)
 *               (copy back: a copy that may run before the applies ahead of it, once its messages are complete
 *               and the apply at index b_off of its lane-step, the reduction of the chunk it copies, is done)
 *
 * Bases: 0 the work vector, 1 the input, 2 the output, 3 the plan's scratch, passed per call.
 * Every lane's messages of a step are posted at once; an apply runs as soon as the messages it
 * depends on are complete and the lane-step's earlier applies have run (so the order in which a
 * rank combines data never changes). Reductions: a C loop where it is exactly numpy's ufunc (the
 * pure-Python path's), MPI_Reduce_local otherwise. With threads to spare, a large block's reduction is
 * queued on a pool of worker threads, split in parts, while this thread goes on completing messages (and
 * runs queued parts itself when it has nothing else to do): the reduction overlaps the wire. A lane-step's
 * next apply waits for its queued one, and a step ends when all are done, so the order in which a rank
 * combines any element never changes and every rank gets the same bits.
 *
 * MPI handles arrive as Fortran integers (MPI_*_f2c), so the file is compiled against the mpi.h of the
 * MPI library that mpi4py loaded, once per venv (swing_mpi/native.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define NBASES 4
#define MAXT 64

/* ---------------------------------------------------------------- reduction kernels */
/* kernel = op * 16 + type; -1: MPI_Reduce_local */
enum { K_SUM, K_PROD, K_MAX, K_MIN, K_BAND, K_BOR, K_BXOR };
enum { T_I8, T_I16, T_I32, T_I64, T_U8, T_U16, T_U32, T_U64, T_F32, T_F64, T_NTYPES };

#define BIN_LOOP(T, EXPR)                                                                 \
    do {                                                                                  \
        const T *A = (const T *)pa, *B = (const T *)pb;                                   \
        T *D = (T *)pd;                                                                   \
        for (Py_ssize_t i = 0; i < n; i++) { T x = A[i], y = B[i]; D[i] = (EXPR); }      \
    } while (0)

#define INT_KERNELS(T, U)                                                                 \
    switch (op) {                                                                         \
    case K_SUM: BIN_LOOP(T, (T)((U)x + (U)y)); return 0;                                 \
    case K_PROD: BIN_LOOP(T, (T)((U)x * (U)y)); return 0;                                \
    case K_MAX: BIN_LOOP(T, x > y ? x : y); return 0;                                     \
    case K_MIN: BIN_LOOP(T, x < y ? x : y); return 0;                                     \
    case K_BAND: BIN_LOOP(T, (T)(x & y)); return 0;                                       \
    case K_BOR: BIN_LOOP(T, (T)(x | y)); return 0;                                        \
    case K_BXOR: BIN_LOOP(T, (T)(x ^ y)); return 0;                                       \
    }                                                                                     \
    return -1;

/* D[i] = A[i] op B[i] for n elements; 0, or -1 for a kernel this file does not have. */
/* The loops compiled twice on x86-64 (AVX2 and the baseline), the CPU picking at load time: the same IEEE
 * operation per element either way (no fused multiply-add, no reassociation: -ffp-contract=off), so the
 * same bits, at the speed numpy's own dispatched loops run. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KERNEL_CLONES
#endif

KERNEL_CLONES
static int kernel_run(int kernel, char *pd, const char *pa, const char *pb, Py_ssize_t n)
{
    int op = kernel >> 4, type = kernel & 15;
    switch (type) {
    case T_I8: INT_KERNELS(int8_t, uint32_t)
    case T_I16: INT_KERNELS(int16_t, uint32_t)
    case T_I32: INT_KERNELS(int32_t, uint32_t)
    case T_I64: INT_KERNELS(int64_t, uint64_t)
    case T_U8: INT_KERNELS(uint8_t, uint32_t)
    case T_U16: INT_KERNELS(uint16_t, uint32_t)
    case T_U32: INT_KERNELS(uint32_t, uint32_t)
    case T_U64: INT_KERNELS(uint64_t, uint64_t)
    case T_F32:
        if (op == K_SUM) { BIN_LOOP(float, x + y); return 0; }
        if (op == K_PROD) { BIN_LOOP(float, x * y); return 0; }
        return -1;
    case T_F64:
        if (op == K_SUM) { BIN_LOOP(double, x + y); return 0; }
        if (op == K_PROD) { BIN_LOOP(double, x * y); return 0; }
        return -1;
    }
    return -1;
}

static int kernel_size(int kernel)
{
    static const int sizes[T_NTYPES] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    int type = kernel & 15;
    return type < T_NTYPES ? sizes[type] : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- the reduction pool */
/* Two kinds of work: a synchronous generation (kernel_threads: the caller and the workers claim a reduction's
 * chunks, the caller returns when every chunk is done) and an asynchronous queue (an engine hands a large reduction to the
 * workers and goes on progressing MPI; each job decrements its lane-step's busy counter when done). */
typedef struct { int kernel; char *d; const char *a, *b; Py_ssize_t n; } job_t;
struct Engine;
typedef struct { job_t j; int *busy; struct Engine *e; int step, lane; } ajob_t;
#define QCAP 256
static void trace_job(struct Engine *e, int kind, int step, int lane, Py_ssize_t bytes);

static struct {
    pthread_mutex_t mu;
    pthread_cond_t go;
    pthread_mutex_t sync_mu;  /* held by the one caller of kernel_threads whose generation runs */
    pthread_t th[MAXT];
    int started;      /* worker threads running */
    long gen;         /* job generation */
    int active;       /* workers taking part in this generation */
    ajob_t q[QCAP];   /* the asynchronous queue */
    long qh, qt;      /* head (next to take) and tail */
    /* the synchronous generation: its chunks are claimed from `next` by the caller and the workers */
    job_t whole;      /* the kernel over all n elements */
    Py_ssize_t chunk; /* elements per chunk */
    long nchunks;
    long next;        /* (atomic) the next chunk to claim */
    int open;         /* workers may still enter the generation */
    int inside;       /* (atomic) workers inside it */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};

#define SYNC_CHUNK_BYTES (128 << 10)
#define WORKER_SPIN_S 50e-6

/* claim and run the generation's chunks until none is left */
static void claim_chunks(job_t w, Py_ssize_t chunk, long nchunks)
{
    int esz = kernel_size(w.kernel);
    for (;;) {
        long c = __atomic_fetch_add(&pool.next, 1, __ATOMIC_ACQ_REL);
        if (c >= nchunks)
            return;
        Py_ssize_t lo = (Py_ssize_t)c * chunk, m = w.n - lo < chunk ? w.n - lo : chunk;
        kernel_run(w.kernel, w.d + lo * esz, w.a + lo * esz, w.b + lo * esz, m);
    }
}

static void run_ajob(ajob_t *j)
{
    if (j->e)
        trace_job(j->e, 2, j->step, j->lane, j->j.n * kernel_size(j->j.kernel));
    kernel_run(j->j.kernel, j->j.d, j->j.a, j->j.b, j->j.n);
    if (j->e)
        trace_job(j->e, 3, j->step, j->lane, j->j.n * kernel_size(j->j.kernel));
    __atomic_sub_fetch(j->busy, 1, __ATOMIC_RELEASE);
}

static void *pool_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    long seen = 0;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        if (pool.gen == seen && pool.qh == pool.qt) {
            /* spin a while first: the next reduction (a segment's, a loop's) often follows at once, and a
             * sleeping worker takes tens of microseconds to wake */
            pthread_mutex_unlock(&pool.mu);
            double until = now_s() + WORKER_SPIN_S;
            for (long i = 1; __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) == seen &&
                             __atomic_load_n(&pool.qt, __ATOMIC_ACQUIRE) == __atomic_load_n(&pool.qh, __ATOMIC_ACQUIRE);
                 i++)
                if (!(i & 255) && now_s() > until)
                    break;
            pthread_mutex_lock(&pool.mu);
            while (pool.gen == seen && pool.qh == pool.qt)
                pthread_cond_wait(&pool.go, &pool.mu);
        }
        if (pool.gen != seen) {
            seen = pool.gen;
            if (!pool.open || id >= pool.active)
                continue;  /* woken too late (the caller ran every chunk), or not asked */
            job_t w = pool.whole;
            Py_ssize_t chunk = pool.chunk;
            long nchunks = pool.nchunks;
            __atomic_add_fetch(&pool.inside, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&pool.mu);
            claim_chunks(w, chunk, nchunks);
            __atomic_sub_fetch(&pool.inside, 1, __ATOMIC_RELEASE);
            pthread_mutex_lock(&pool.mu);
            continue;
        }
        ajob_t j = pool.q[pool.qh % QCAP];
        __atomic_add_fetch(&pool.qh, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&pool.mu);
        run_ajob(&j);
        pthread_mutex_lock(&pool.mu);
    }
    return NULL;
}

static int pool_grow(int workers)
{
    while (pool.started < workers && pool.started < MAXT) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&pool.th[pool.started], &at, pool_worker, (void *)(intptr_t)pool.started);
        pthread_attr_destroy(&at);
        if (rc)
            break;
        pool.started++;
    }
    return pool.started;
}

/* run one queued job on this thread, if there is one; 1 if it ran one */
static int pool_help(void)
{
    pthread_mutex_lock(&pool.mu);
    if (pool.qh == pool.qt) {
        pthread_mutex_unlock(&pool.mu);
        return 0;
    }
    ajob_t j = pool.q[pool.qh % QCAP];
    __atomic_add_fetch(&pool.qh, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pool.mu);
    run_ajob(&j);
    return 1;
}

/* queue the kernel over n elements in up to `parts` jobs (each >= min_bytes); *busy counts them down.
 * 0 when queued, -1 when there are no workers or no room (the caller runs it itself) */
static int pool_submit(int kernel, char *d, const char *a, const char *b, Py_ssize_t n, int parts,
                       Py_ssize_t min_bytes, int *busy, struct Engine *e, int step, int lane)
{
    int esz = kernel_size(kernel);
    Py_ssize_t bytes = n * esz;
    if (min_bytes > 0 && bytes / min_bytes < parts)
        parts = (int)(bytes / min_bytes);
    if (parts < 1)
        parts = 1;
    pthread_mutex_lock(&pool.mu);
    if (pool_grow(parts) < 1 || pool.qt - pool.qh + parts > QCAP) {
        pthread_mutex_unlock(&pool.mu);
        return -1;
    }
    Py_ssize_t per = (n + parts - 1) / parts, at = 0;
    __atomic_add_fetch(busy, parts, __ATOMIC_RELAXED);
    for (int t = 0; t < parts; t++) {
        Py_ssize_t lo = at, hi = at + per < n ? at + per : n;
        ajob_t j = {{kernel, d + lo * esz, a + lo * esz, b + lo * esz, hi > lo ? hi - lo : 0}, busy, e, step, lane};
        pool.q[pool.qt % QCAP] = j;
        __atomic_add_fetch(&pool.qt, 1, __ATOMIC_RELEASE);
        at = hi;
    }
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    return 0;
}

/* the kernel over n elements, on up to `threads` threads (this one included) when it is at least 2 x min_bytes.
 * The work is cut in chunks that this thread and the woken workers claim one at a time: this thread starts at
 * once and a worker that wakes late takes fewer (none if it wakes after the last), so two threads never cost
 * a worker's wake-up more than one. Each element is combined once, by one thread: the bits never change.
 * One generation runs at a time: a caller that finds another's running (threads of an MPI_THREAD_MULTIPLE
 * program) runs its kernel alone on its own thread. */
static void kernel_threads(int kernel, char *d, const char *a, const char *b, Py_ssize_t n, int threads,
                           Py_ssize_t min_bytes)
{
    int esz = kernel_size(kernel);
    Py_ssize_t bytes = n * esz;
    int parts = threads;
    if (min_bytes > 0 && bytes / min_bytes < parts)
        parts = (int)(bytes / min_bytes);
    if (parts <= 1) {
        kernel_run(kernel, d, a, b, n);
        return;
    }
    if (pthread_mutex_trylock(&pool.sync_mu) != 0) {
        kernel_run(kernel, d, a, b, n);
        return;
    }
    Py_ssize_t chunk = SYNC_CHUNK_BYTES / esz;
    long nchunks = (long)((n + chunk - 1) / chunk);
    job_t w = {kernel, d, a, b, n};
    pthread_mutex_lock(&pool.mu);
    int workers = pool_grow(parts - 1);
    if (workers < parts - 1)
        parts = workers + 1;
    pool.whole = w;
    pool.chunk = chunk;
    pool.nchunks = nchunks;
    __atomic_store_n(&pool.next, 0, __ATOMIC_RELAXED);
    pool.open = 1;
    pool.active = parts - 1;
    __atomic_add_fetch(&pool.gen, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    claim_chunks(w, chunk, nchunks);
    pthread_mutex_lock(&pool.mu);
    pool.open = 0;  /* no worker enters now; those inside hold a chunk at most */
    pthread_mutex_unlock(&pool.mu);
    for (long spins = 0; __atomic_load_n(&pool.inside, __ATOMIC_ACQUIRE) > 0; spins++)
        if (spins > 256)
            sched_yield();
    pthread_mutex_unlock(&pool.sync_mu);
}

/* ---------------------------------------------------------------- the engine object */
typedef struct Engine {
    PyObject_HEAD
    int64_t *prog;          /* copy of the program */
    Py_ssize_t proglen;
    Py_ssize_t *step_at;    /* offset of each step's record */
    Py_ssize_t nsteps;
    MPI_Comm comm;
    MPI_Datatype dt;
    MPI_Op op;
    MPI_Datatype *types;    /* types[0] = dt, then the plan's derived types */
    int ntypes;
    int kernel;             /* -1: MPI_Reduce_local */
    int ext;
    int threads;
    Py_ssize_t min_bytes;   /* smallest part of a threaded reduction */
    /* the running operation */
    int active;
    int tag;
    Py_ssize_t step;
    char *base[NBASES];
    Py_buffer views[NBASES];
    int held[NBASES];
    MPI_Request *reqs;      /* requests of the current step, all lane-steps */
    int *req_ls;            /* lane-step of each request (index within the step) */
    int *req_done;
    int *indices;
    MPI_Status *statuses;
    int nreqs, cap;
    Py_ssize_t *ls_at;      /* record offset of each lane-step of the current step */
    int *ls_msg0;           /* first request index of each lane-step */
    int *ls_next;           /* next apply of each lane-step */
    Py_ssize_t *ls_apply;   /* offset of the next apply record */
    int nls, lscap;
    int applies_left;
    int *ls_ap0;            /* index of each lane-step's first apply among the step's */
    int *ls_queued;         /* the apply each lane-step queued last (-1: none); only it may still be running */
    char *ls_early;         /* whether each lane-step has copy-back applies */
    char *ap_done;          /* per apply of the step: a copy back already run ahead of its turn */
    int *ls_busy;           /* queued reduction jobs of each lane-step not finished (atomic) */
    int held_back;          /* an apply waits for a queued reduction (so no message completion may follow) */
    /* a trace of the last operation (trace(capacity) turns it on): t, kind, step, lane, value */
    double t0;
    double *tr_t;
    long long *tr_v;
    int tr_cap, tr_n;
    /* an error: where it happened */
    int err_code, err_step, err_lane, err_peer, err_kind;
} Engine;

static PyObject *CoreError;

/* trace kinds: 0 a step posted (value: its messages), 1 a message complete (value: its bytes),
 * 2 a reduction starts (value: bytes), 3 it ends, 4 the operation is complete, 5 a copy back runs ahead of
 * its turn (value: bytes) */
static void trace_event(Engine *e, int kind, int step, int lane, long long value)
{
    if (!e->tr_cap)
        return;
    int i = __atomic_fetch_add(&e->tr_n, 1, __ATOMIC_RELAXED);
    if (i >= e->tr_cap)
        return;
    e->tr_t[i] = now_s() - e->t0;
    e->tr_v[4 * i] = kind;
    e->tr_v[4 * i + 1] = step;
    e->tr_v[4 * i + 2] = lane;
    e->tr_v[4 * i + 3] = value;
}

static void trace_job(struct Engine *e, int kind, int step, int lane, Py_ssize_t bytes)
{
    trace_event(e, kind, step, lane, bytes);
}

/* wait for the queued reductions of the current step (helping with them) */
static void drain(Engine *e)
{
    for (int l = 0; l < e->nls; l++)
        while (__atomic_load_n(&e->ls_busy[l], __ATOMIC_ACQUIRE))
            if (!pool_help())
                sched_yield();
}

static void release_views(Engine *e)
{
    for (int i = 0; i < NBASES; i++)
        if (e->held[i]) {
            PyBuffer_Release(&e->views[i]);
            e->held[i] = 0;
        }
}

static void Engine_dealloc(Engine *e)
{
    if (e->ls_busy)
        drain(e);
    release_views(e);
    PyMem_Free(e->ls_busy);
    PyMem_Free(e->tr_t);
    PyMem_Free(e->tr_v);
    PyMem_Free(e->prog);
    PyMem_Free(e->step_at);
    PyMem_Free(e->types);
    PyMem_Free(e->reqs);
    PyMem_Free(e->req_ls);
    PyMem_Free(e->req_done);
    PyMem_Free(e->indices);
    PyMem_Free(e->statuses);
    PyMem_Free(e->ls_at);
    PyMem_Free(e->ls_msg0);
    PyMem_Free(e->ls_next);
    PyMem_Free(e->ls_apply);
    PyMem_Free(e->ls_ap0);
    PyMem_Free(e->ls_queued);
    PyMem_Free(e->ls_early);
    PyMem_Free(e->ap_done);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* the offset of the apply record after the one at `at` (10 fields, then its deps where it names them) */
static Py_ssize_t next_apply(const int64_t *p, Py_ssize_t at)
{
    return at + 10 + (p[at + 9] > 0 ? p[at + 9] : 0);
}

/* Engine(program: bytes of int64, comm_f, datatype_f, op_f, types_f: tuple, kernel, ext, threads, min_bytes) */
static int Engine_init(Engine *e, PyObject *args, PyObject *kw)
{
    Py_buffer prog;
    long long comm_f, dt_f, op_f, min_bytes;
    PyObject *types;
    int kernel, ext, threads;
    if (!PyArg_ParseTuple(args, "y*LLLO!iiiL", &prog, &comm_f, &dt_f, &op_f, &PyTuple_Type, &types, &kernel, &ext,
                          &threads, &min_bytes))
        return -1;
    e->proglen = prog.len / 8;
    e->prog = PyMem_Malloc(prog.len + 8);
    if (!e->prog) {
        PyBuffer_Release(&prog);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(e->prog, prog.buf, prog.len);
    PyBuffer_Release(&prog);
    e->comm = MPI_Comm_f2c((MPI_Fint)comm_f);
    e->dt = MPI_Type_f2c((MPI_Fint)dt_f);
    e->op = MPI_Op_f2c((MPI_Fint)op_f);
    e->ntypes = 1 + (int)PyTuple_GET_SIZE(types);
    e->types = PyMem_Malloc(sizeof(MPI_Datatype) * e->ntypes);
    e->types[0] = e->dt;
    for (int i = 1; i < e->ntypes; i++)
        e->types[i] = MPI_Type_f2c((MPI_Fint)PyLong_AsLongLong(PyTuple_GET_ITEM(types, i - 1)));
    if (PyErr_Occurred())
        return -1;
    e->kernel = kernel;
    e->ext = ext;
    e->threads = threads < 1 ? 1 : threads;
    e->min_bytes = min_bytes;
    /* index the steps and size the per-step arrays */
    int64_t *p = e->prog;
    Py_ssize_t at = 0;
    e->nsteps = p[at++];
    e->step_at = PyMem_Malloc(sizeof(Py_ssize_t) * (e->nsteps + 1));
    int maxreq = 1, maxls = 1, maxap = 1;
    for (Py_ssize_t s = 0; s < e->nsteps; s++) {
        e->step_at[s] = at;
        int nls = (int)p[at++], nreq = 0, nap_step = 0;
        if (nls > maxls)
            maxls = nls;
        for (int l = 0; l < nls; l++) {
            int npre = (int)p[at + 1], nmsg = (int)p[at + 2], nap = (int)p[at + 3];
            at += 4 + 5 * npre + 6 * nmsg;
            nreq += nmsg;
            nap_step += nap;
            for (int k = 0; k < nap; k++)
                at = next_apply(p, at);
        }
        if (nreq > maxreq)
            maxreq = nreq;
        if (nap_step > maxap)
            maxap = nap_step;
        if (at > e->proglen) {
            PyErr_SetString(PyExc_ValueError, "truncated program");
            return -1;
        }
    }
    e->cap = maxreq;
    e->reqs = PyMem_Malloc(sizeof(MPI_Request) * maxreq);
    e->req_ls = PyMem_Malloc(sizeof(int) * maxreq);
    e->req_done = PyMem_Malloc(sizeof(int) * maxreq);
    e->indices = PyMem_Malloc(sizeof(int) * maxreq);
    e->statuses = PyMem_Malloc(sizeof(MPI_Status) * maxreq);
    e->lscap = maxls;
    e->ls_at = PyMem_Malloc(sizeof(Py_ssize_t) * maxls);
    e->ls_msg0 = PyMem_Malloc(sizeof(int) * (maxls + 1));
    e->ls_next = PyMem_Malloc(sizeof(int) * maxls);
    e->ls_apply = PyMem_Malloc(sizeof(Py_ssize_t) * maxls);
    e->ls_busy = PyMem_Calloc(maxls, sizeof(int));
    e->ls_ap0 = PyMem_Malloc(sizeof(int) * maxls);
    e->ls_queued = PyMem_Malloc(sizeof(int) * maxls);
    e->ls_early = PyMem_Calloc(maxls, 1);
    e->ap_done = PyMem_Calloc(maxap, 1);
    if (!e->ls_busy || !e->ls_ap0 || !e->ls_queued || !e->ls_early || !e->ap_done || !e->reqs || !e->req_ls || !e->req_done || !e->indices || !e->statuses || !e->ls_at || !e->ls_msg0 ||
        !e->ls_next || !e->ls_apply) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void set_error(Engine *e, int code, int lane, int peer, int kind)
{
    if (!e->err_code) {
        e->err_code = code ? code : MPI_ERR_OTHER;
        e->err_step = (int)e->step;
        e->err_lane = lane;
        e->err_peer = peer;
        e->err_kind = kind;
    }
}

/* out = peer op given (peer_first) or given op peer through the C loop, on the engine's threads */
static void kernel_apply(Engine *e, char *out, const char *peer, const char *given, Py_ssize_t nbytes,
                         int peer_first)
{
    Py_ssize_t m = nbytes / e->ext * e->ext / kernel_size(e->kernel);
    kernel_threads(e->kernel, out, peer_first ? peer : given, peer_first ? given : peer, m, e->threads,
                   e->min_bytes);
}

/* local = peer op local (peer_first) or local op peer; n elements */
static int do_reduce(Engine *e, char *local, char *peer, Py_ssize_t nbytes, int peer_first)
{
    Py_ssize_t n = nbytes / e->ext;
    if (!n)
        return 0;
    if (e->kernel >= 0) {
        kernel_apply(e, local, peer, local, nbytes, peer_first);
        return 0;
    }
    if (n > INT32_MAX)
        return MPI_ERR_COUNT;
    if (peer_first)
        return MPI_Reduce_local(peer, local, (int)n, e->dt, e->op);
    int rc = MPI_Reduce_local(local, peer, (int)n, e->dt, e->op);
    if (rc == MPI_SUCCESS)
        memcpy(local, peer, nbytes);
    return rc;
}

/* out = peer op given (peer_first) or given op peer */
static int do_first(Engine *e, char *out, char *peer, char *given, Py_ssize_t nbytes, int peer_first)
{
    Py_ssize_t n = nbytes / e->ext;
    if (e->kernel >= 0 && n) {
        kernel_apply(e, out, peer, given, nbytes, peer_first);
        return 0;
    }
    if (out != given)
        memmove(out, given, nbytes);
    return do_reduce(e, out, peer, nbytes, peer_first);
}

/* post step e->step: every lane-step's copies, receives and sends */
static int post_step(Engine *e)
{
    int64_t *p = e->prog;
    Py_ssize_t at = e->step_at[e->step];
    int nls = (int)p[at++];
    e->nls = nls;
    e->nreqs = 0;
    e->applies_left = 0;
    for (int l = 0; l < nls; l++) {
        e->ls_at[l] = at;
        int lane = (int)p[at], npre = (int)p[at + 1], nmsg = (int)p[at + 2], nap = (int)p[at + 3];
        at += 4;
        for (int k = 0; k < npre; k++, at += 5)
            memcpy(e->base[p[at]] + p[at + 1], e->base[p[at + 2]] + p[at + 3], (size_t)p[at + 4]);
        e->ls_msg0[l] = e->nreqs;
        for (int k = 0; k < nmsg; k++, at += 6) {
            int kind = (int)p[at], count = (int)p[at + 3], peer = (int)p[at + 5];
            char *buf = e->base[p[at + 1]] + p[at + 2];
            MPI_Datatype t = e->types[p[at + 4]];
            MPI_Request *r = &e->reqs[e->nreqs];
            int rc = kind == 0 ? MPI_Irecv(buf, count, t, peer, e->tag + lane, e->comm, r)
                               : MPI_Isend(buf, count, t, peer, e->tag + lane, e->comm, r);
            if (rc != MPI_SUCCESS) {
                set_error(e, rc, lane, peer, kind);
                return -1;
            }
            e->req_ls[e->nreqs] = l;
            e->req_done[e->nreqs] = 0;
            e->nreqs++;
        }
        e->ls_next[l] = 0;
        e->ls_apply[l] = at;
        e->ls_ap0[l] = e->applies_left;
        e->ls_queued[l] = -1;
        e->ls_early[l] = 0;
        for (int k = 0; k < nap; k++) {
            e->ap_done[e->applies_left + k] = 0;
            if (p[at] == 3)
                e->ls_early[l] = 1;
            at = next_apply(p, at);
        }
        e->applies_left += nap;
    }
    e->ls_msg0[nls] = e->nreqs;
    trace_event(e, 0, (int)e->step, -1, e->nreqs);
    return 0;
}

/* the kernel part of a reduce (kind 1) or first (kind 2) apply, queued on the pool's workers where the
 * engine has threads to spare and the block is large: 1 if queued, 0 if the caller must run it */
static int queue_apply(Engine *e, int l, int kind, char *dst, char *a, char *b, Py_ssize_t nbytes, int pf)
{
    if (e->threads < 2 || e->kernel < 0 || nbytes < e->min_bytes || nbytes % e->ext)
        return 0;
    Py_ssize_t m = nbytes / kernel_size(e->kernel);
    const char *x = kind == 1 ? (pf ? a : dst) : (pf ? a : b), *y = kind == 1 ? (pf ? dst : a) : (pf ? b : a);
    return pool_submit(e->kernel, dst, x, y, m, e->threads, e->min_bytes, &e->ls_busy[l], e, (int)e->step,
                       (int)e->prog[e->ls_at[l]]) == 0;
}

/* whether the messages apply record `at` depends on are complete (m0, m1: its lane-step's requests) */
static int deps_ready(Engine *e, Py_ssize_t at, int m0, int m1)
{
    int64_t *p = e->prog;
    int ndeps = (int)p[at + 9];
    if (ndeps < 0) {
        for (int r = m0; r < m1; r++)
            if (!e->req_done[r])
                return 0;
        return 1;
    }
    for (int d = 0; d < ndeps; d++)
        if (!e->req_done[m0 + p[at + 10 + d]])
            return 0;
    return 1;
}

/* run lane-step l's copy-back applies ahead of their turn where their messages are complete and the
 * reduction each copies is done: every apply run in turn is, but the one queued last while the lane-step's
 * jobs are not all finished (a lane-step's next apply waits for its queued one, so only that one can be
 * running). Each writes its own block from its own chunk. */
static void run_early_copies(Engine *e, int l)
{
    int64_t *p = e->prog;
    Py_ssize_t ls = e->ls_at[l], at = e->ls_apply[l];
    int nap = (int)p[ls + 3], m0 = e->ls_msg0[l], m1 = e->ls_msg0[l + 1];
    int running = __atomic_load_n(&e->ls_busy[l], __ATOMIC_ACQUIRE) ? e->ls_queued[l] : -1;
    for (int k = e->ls_next[l] + 1; k < nap; k++) {  /* the one in turn waits for its own messages */
        at = next_apply(p, at);
        int sum = (int)p[at + 6];
        if (p[at] == 3 && !e->ap_done[e->ls_ap0[l] + k] && sum < e->ls_next[l] && sum != running &&
            deps_ready(e, at, m0, m1)) {
            trace_event(e, 5, (int)e->step, (int)p[ls], p[at + 7]);
            memcpy(e->base[p[at + 1]] + p[at + 2], e->base[p[at + 3]] + p[at + 4], (size_t)p[at + 7]);
            e->ap_done[e->ls_ap0[l] + k] = 1;
            e->applies_left--;
        }
    }
}

/* run every apply whose messages are complete, in each lane-step's order (copy backs also ahead of it);
 * -1 on an MPI error */
static int run_applies(Engine *e)
{
    int64_t *p = e->prog;
    e->held_back = 0;
    for (int l = 0; l < e->nls; l++) {
        Py_ssize_t ls = e->ls_at[l];
        int nap = (int)p[ls + 3], m0 = e->ls_msg0[l], m1 = e->ls_msg0[l + 1];
        while (e->ls_next[l] < nap) {
            Py_ssize_t at = e->ls_apply[l];
            if (p[at] == 3 && e->ap_done[e->ls_ap0[l] + e->ls_next[l]]) {  /* ran ahead of its turn */
                e->ls_next[l]++;
                e->ls_apply[l] = next_apply(p, at);
                continue;
            }
            if (__atomic_load_n(&e->ls_busy[l], __ATOMIC_ACQUIRE)) {
                e->held_back = 1;  /* the lane-step's previous reduction is still on the workers */
                break;
            }
            if (!deps_ready(e, at, m0, m1))
                break;
            int kind = (int)p[at], pf = (int)p[at + 8], rc = 0;
            char *dst = e->base[p[at + 1]] + p[at + 2], *a = e->base[p[at + 3]] + p[at + 4];
            char *b = kind == 2 ? e->base[p[at + 5]] + p[at + 6] : NULL;
            Py_ssize_t nbytes = (Py_ssize_t)p[at + 7];
            if (kind == 0 || kind == 3) {
                memcpy(dst, a, nbytes);
            } else if (queue_apply(e, l, kind, dst, a, b, nbytes, pf)) {
                e->ls_queued[l] = e->ls_next[l];
            } else {
                trace_event(e, 2, (int)e->step, (int)p[ls], nbytes);
                rc = kind == 1 ? do_reduce(e, dst, a, nbytes, pf) : do_first(e, dst, a, b, nbytes, pf);
                trace_event(e, 3, (int)e->step, (int)p[ls], nbytes);
            }
            if (rc != MPI_SUCCESS) {
                set_error(e, rc, (int)p[ls], -1, 2);
                return -1;
            }
            e->ls_next[l]++;
            e->ls_apply[l] = next_apply(p, at);
            e->applies_left--;
        }
        if (e->ls_early[l] && e->ls_next[l] < nap)
            run_early_copies(e, l);
    }
    return 0;
}

static int step_done(Engine *e)
{
    if (e->applies_left)
        return 0;
    for (int l = 0; l < e->nls; l++)
        if (__atomic_load_n(&e->ls_busy[l], __ATOMIC_ACQUIRE))
            return 0;
    for (int r = 0; r < e->nreqs; r++)
        if (!e->req_done[r])
            return 0;
    return 1;
}

/* mark the requests that completed; -1 on an error in one of them */
static int mark(Engine *e, int outcount, int rc)
{
    int64_t *p = e->prog;
    for (int i = 0; i < outcount; i++) {
        int r = e->indices[i];
        e->req_done[r] = 1;
        if (e->tr_cap)
            trace_event(e, 1, (int)e->step, (int)p[e->ls_at[e->req_ls[r]]], r);
        if (rc == MPI_ERR_IN_STATUS && e->statuses[i].MPI_ERROR != MPI_SUCCESS) {
            int l = e->req_ls[r];
            Py_ssize_t at = e->ls_at[l] + 4 + 5 * p[e->ls_at[l] + 1] + 6 * (r - e->ls_msg0[l]);
            set_error(e, e->statuses[i].MPI_ERROR, (int)p[e->ls_at[l]], (int)p[at + 5], (int)p[at]);
        }
    }
    if (rc != MPI_SUCCESS && !e->err_code)
        set_error(e, rc, -1, -1, -1);
    return e->err_code ? -1 : 0;
}

/* advance while no wait is needed; 1 when the operation is complete, 0 if waiting, -1 on an error */
static int advance(Engine *e)
{
    for (;;) {
        if (run_applies(e) < 0)
            return -1;
        if (!step_done(e))
            return 0;
        e->step++;
        if (e->step >= e->nsteps) {
            trace_event(e, 4, (int)e->step, -1, 0);
            return 1;
        }
        if (post_step(e) < 0)
            return -1;
    }
}

static int pending_count(Engine *e)
{
    int left = 0;
    for (int r = 0; r < e->nreqs; r++)
        left += !e->req_done[r];
    return left;
}

/* one poll: Testsome over the step's live requests (MPI ignores the completed, now null, ones) */
static int poll_once(Engine *e, int block)
{
    int outcount = 0, rc;
    if (block)
        rc = MPI_Waitsome(e->nreqs, e->reqs, &outcount, e->indices, e->statuses);
    else
        rc = MPI_Testsome(e->nreqs, e->reqs, &outcount, e->indices, e->statuses);
    if (outcount == MPI_UNDEFINED)
        outcount = 0;
    if (mark(e, outcount, rc) < 0)
        return -1;
    return outcount;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* whether the queued reductions the step waits for (after its messages) are done */
static int queue_moved(Engine *e)
{
    if (!e->held_back && e->applies_left)
        return 0;
    for (int l = 0; l < e->nls; l++)
        if (__atomic_load_n(&e->ls_busy[l], __ATOMIC_ACQUIRE))
            return 0;
    return e->held_back || pending_count(e) == 0;
}

/* policy: 0 spin, 1 yield, 2 backoff. Returns 1 done, 2 timed out, -1 error */
static int wait_loop(Engine *e, int policy, double timeout, double sleep_us)
{
    int st = advance(e);
    double deadline = timeout >= 0 ? now_s() + timeout : -1, since = 0;
    long idle = 0;
    while (st == 0) {
        if (policy == 0 && deadline < 0 && pending_count(e) > 0 && !pool_help()) {
            if (poll_once(e, 1) < 0)
                return -1;
        } else {
            int got = poll_once(e, 0);
            if (got < 0)
                return -1;
            if (got == 0) {
                if (pool_help() || queue_moved(e))
                    goto next;  /* a queued reduction ran on this thread, or finished: the step moves on */
                double t = (deadline >= 0 || policy == 2) ? now_s() : 0;
                if (deadline >= 0 && t > deadline)
                    return 2;
                idle++;
                if (policy == 2 && idle > 4) {
                    if (!since)
                        since = t;
                    double s = (t - since) * 0.25;
                    sleep_s(s < 20e-6 ? 20e-6 : s > 4e-3 ? 4e-3 : s);
                } else if (policy == 1 && sleep_us > 0 && idle > 2) {
                    sleep_s(sleep_us * 1e-6);
                } else if (policy != 0) {
                    sched_yield();
                }
                continue;
            }
        next:
            idle = 0;
            since = 0;
        }
        st = advance(e);
    }
    return st;
}

static int bind_bases(Engine *e, PyObject *bufs[NBASES])
{
    for (int i = 0; i < NBASES; i++) {
        e->base[i] = NULL;
        if (bufs[i] == Py_None)
            continue;
        if (PyObject_GetBuffer(bufs[i], &e->views[i], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();
            if (PyObject_GetBuffer(bufs[i], &e->views[i], PyBUF_C_CONTIGUOUS) < 0) {
                release_views(e);
                return -1;
            }
        }
        e->held[i] = 1;
        e->base[i] = e->views[i].buf;
    }
    return 0;
}

static PyObject *outcome(Engine *e, int st)
{
    if (st == 1) {
        e->active = 0;
        release_views(e);
        Py_RETURN_TRUE;
    }
    if (st == 0)
        Py_RETURN_FALSE;
    if (st == 2)
        return PyLong_FromLong(2);
    Py_BEGIN_ALLOW_THREADS
    drain(e);
    Py_END_ALLOW_THREADS
    e->active = 0;
    release_views(e);  /* the operation is broken; Python keeps the buffers alive */
    return PyLong_FromLong(-1);
}

/* make the engine ready for an operation with these tags, its buffers bound */
static void reset(Engine *e, int tag)
{
    e->tag = tag;
    e->step = 0;
    e->err_code = 0;
    e->active = 1;
    e->nls = 0;
    e->tr_n = 0;
    e->t0 = now_s();
}

/* bind an operation's buffers and reset the engine for it; -1 with a Python error set */
static int begin(Engine *e, PyObject *bufs[NBASES], int tag)
{
    if (e->active) {
        PyErr_SetString(CoreError, "the engine is running an operation");
        return -1;
    }
    if (bind_bases(e, bufs) < 0)
        return -1;
    reset(e, tag);
    return 0;
}

/* post the first step and wait for the whole operation, without the GIL: 1 done, 2 timed out, -1 error */
static int run_all(Engine *e, int policy, double timeout, double sleep_us)
{
    int st = 1;
    if (e->nsteps > 0) {
        Py_BEGIN_ALLOW_THREADS
        st = post_step(e) < 0 ? -1 : wait_loop(e, policy, timeout, sleep_us);
        Py_END_ALLOW_THREADS
    }
    return st;
}

/* start(work, src, out, scratch, tag) -> True if already complete, False if not, -1 on an error */
static PyObject *Engine_start(Engine *e, PyObject *args)
{
    PyObject *bufs[NBASES];
    int tag;
    if (!PyArg_ParseTuple(args, "OOOOi", &bufs[0], &bufs[1], &bufs[2], &bufs[3], &tag) || begin(e, bufs, tag) < 0)
        return NULL;
    int st = 1;
    if (e->nsteps > 0) {
        Py_BEGIN_ALLOW_THREADS
        st = post_step(e) < 0 ? -1 : advance(e);
        Py_END_ALLOW_THREADS
    }
    return outcome(e, st);
}

/* test() -> True when complete, False if not, -1 on an error */
static PyObject *Engine_test(Engine *e, PyObject *unused)
{
    if (!e->active)
        Py_RETURN_TRUE;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = poll_once(e, 0) < 0 ? -1 : advance(e);
    Py_END_ALLOW_THREADS
    return outcome(e, st);
}

/* wait(policy, timeout (<0: none), sleep_us) -> True, 2 timed out, -1 error */
static PyObject *Engine_wait(Engine *e, PyObject *args)
{
    int policy;
    double timeout, sleep_us;
    if (!PyArg_ParseTuple(args, "idd", &policy, &timeout, &sleep_us))
        return NULL;
    if (!e->active)
        Py_RETURN_TRUE;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = wait_loop(e, policy, timeout, sleep_us);
    Py_END_ALLOW_THREADS
    return outcome(e, st);
}

/* run(work, src, out, scratch, tag, policy, timeout, sleep_us): start and wait in one call */
static PyObject *Engine_run(Engine *e, PyObject *args)
{
    PyObject *bufs[NBASES];
    int tag, policy;
    double timeout, sleep_us;
    if (!PyArg_ParseTuple(args, "OOOOiidd", &bufs[0], &bufs[1], &bufs[2], &bufs[3], &tag, &policy, &timeout,
                          &sleep_us) || begin(e, bufs, tag) < 0)
        return NULL;
    return outcome(e, run_all(e, policy, timeout, sleep_us));
}

/* pending() -> (step, [(lane, peer, kind), ...]) of the messages not complete */
static PyObject *Engine_pending(Engine *e, PyObject *unused)
{
    int64_t *p = e->prog;
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    for (int r = 0; r < e->nreqs; r++) {
        if (e->req_done[r])
            continue;
        int l = e->req_ls[r];
        Py_ssize_t at = e->ls_at[l] + 4 + 5 * p[e->ls_at[l] + 1] + 6 * (r - e->ls_msg0[l]);
        PyObject *t = Py_BuildValue("(iii)", (int)p[e->ls_at[l]], (int)p[at + 5], (int)p[at]);
        if (!t || PyList_Append(list, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(t);
    }
    return Py_BuildValue("(nN)", e->step, list);
}

/* error() -> (code, step, lane, peer, kind) of the first error of the last operation */
static PyObject *Engine_error(Engine *e, PyObject *unused)
{
    return Py_BuildValue("(iiiii)", e->err_code, e->err_step, e->err_lane, e->err_peer, e->err_kind);
}

/* abandon(): forget a broken operation (its requests stay posted, as MPI has no way to take them back) */
static PyObject *Engine_abandon(Engine *e, PyObject *unused)
{
    Py_BEGIN_ALLOW_THREADS
    drain(e);
    Py_END_ALLOW_THREADS
    e->active = 0;
    release_views(e);
    Py_RETURN_NONE;
}

/* trace(capacity=-1) -> [(t, kind, step, lane, value)] of the last operation; capacity >= 0 sets how many
 * events the next operations keep (0: no trace) */
static PyObject *Engine_trace(Engine *e, PyObject *args)
{
    int cap = -1;
    if (!PyArg_ParseTuple(args, "|i", &cap))
        return NULL;
    int n = e->tr_n < e->tr_cap ? e->tr_n : e->tr_cap;
    PyObject *list = PyList_New(n);
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(dLLLL)", e->tr_t[i], e->tr_v[4 * i], e->tr_v[4 * i + 1], e->tr_v[4 * i + 2],
                                    e->tr_v[4 * i + 3]);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, t);
    }
    if (cap >= 0) {
        if (e->active) {
            Py_DECREF(list);
            PyErr_SetString(CoreError, "the engine is running an operation");
            return NULL;
        }
        PyMem_Free(e->tr_t);
        PyMem_Free(e->tr_v);
        e->tr_t = NULL;
        e->tr_v = NULL;
        e->tr_cap = e->tr_n = 0;
        if (cap > 0) {
            e->tr_t = PyMem_Malloc(sizeof(double) * cap);
            e->tr_v = PyMem_Malloc(sizeof(long long) * 4 * cap);
            if (!e->tr_t || !e->tr_v) {
                Py_DECREF(list);
                return PyErr_NoMemory();
            }
            e->tr_cap = cap;
        }
    }
    return list;
}

static PyObject *Engine_get_active(Engine *e, void *closure)
{
    return PyBool_FromLong(e->active);
}

static PyObject *Engine_get_threads(Engine *e, void *closure)
{
    return PyLong_FromLong(e->threads);
}

static int Engine_set_threads(Engine *e, PyObject *v, void *closure)
{
    long t = PyLong_AsLong(v);
    if (t == -1 && PyErr_Occurred())
        return -1;
    e->threads = t < 1 ? 1 : t > MAXT ? MAXT : (int)t;
    return 0;
}

static PyMethodDef Engine_methods[] = {
    {"start", (PyCFunction)Engine_start, METH_VARARGS, "start(work, src, out, scratch, tag)"},
    {"test", (PyCFunction)Engine_test, METH_NOARGS, "test() -> True when complete"},
    {"wait", (PyCFunction)Engine_wait, METH_VARARGS, "wait(policy, timeout, sleep_us)"},
    {"run", (PyCFunction)Engine_run, METH_VARARGS, "run(work, src, out, scratch, tag, policy, timeout, sleep_us)"},
    {"pending", (PyCFunction)Engine_pending, METH_NOARGS, "pending() -> (step, [(lane, peer, kind)])"},
    {"error", (PyCFunction)Engine_error, METH_NOARGS, "error() -> (code, step, lane, peer, kind)"},
    {"abandon", (PyCFunction)Engine_abandon, METH_NOARGS, "forget a broken operation"},
    {"trace", (PyCFunction)Engine_trace, METH_VARARGS, "trace(capacity=-1) -> [(t, kind, step, lane, value)]"},
    {NULL}};

static PyGetSetDef Engine_getset[] = {
    {"active", (getter)Engine_get_active, NULL, "an operation is running", NULL},
    {"threads", (getter)Engine_get_threads, (setter)Engine_set_threads, "reduction threads", NULL},
    {NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "swing_mpi_core.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled plan program (see swing_mpi/program.py).",
    .tp_methods = Engine_methods,
    .tp_getset = Engine_getset,
    .tp_init = (initproc)Engine_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- the repeat path's record
 * Repeat(plan_ref, state, recv_dtype, recv_bytes, send_dtype, send_bytes, scratch, policy, timeout, settings,
 *        tag_base, tag_seqs, max_lanes): a blocking allreduce on the same arrays as an earlier call, run in one call
 * (swing_mpi/repeat.py). Called as record(sendbuf, recvbuf, op) once the caller has matched the communicator,
 * op, options and both arrays' identities; it checks what can change between calls (the plan is alive and
 * idle and has the engine, the communicator's state is alive, the dtypes are the recorded objects, the arrays
 * are C-contiguous, the receive array writable, the byte sizes as recorded), takes the operation's number
 * from the state (state.seq += 1, the same count every other path keeps) and runs the plan's engine.
 * Returns None when it ran, False when something no longer fits (nothing done, no number taken: the caller
 * goes the general way); an engine failure goes to plan._core_failed, which raises. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *plan_ref, *st, *rdtype, *sdtype, *scratch, *settings;  /* sdtype None: in place */
    Py_ssize_t rbytes, sbytes;
    int policy;
    double timeout;
    long long tag_base, tag_seqs, max_lanes;
} RepeatRec;

static PyObject *s_alive, *s_active, *s_fast, *s_fast_src, *s_dtype, *s_seq, *s_sleep_us, *s_core_failed;

static void RepeatRec_dealloc(RepeatRec *r)
{
    Py_XDECREF(r->plan_ref);
    Py_XDECREF(r->st);
    Py_XDECREF(r->rdtype);
    Py_XDECREF(r->sdtype);
    Py_XDECREF(r->scratch);
    Py_XDECREF(r->settings);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* 1 when obj.name is want, 0 if not, -1 with an error set */
static int attr_is(PyObject *obj, PyObject *name, PyObject *want)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v)
        return -1;
    int same = v == want;
    Py_DECREF(v);
    return same;
}

static PyObject *RepeatRec_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    RepeatRec *r = (RepeatRec *)self;
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames) {
        PyErr_SetString(PyExc_TypeError, "record(sendbuf, recvbuf, op)");
        return NULL;
    }
    PyObject *send = args[0], *recv = args[1];
    int in_place = r->sdtype == Py_None;
    PyObject *plan;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(r->plan_ref, &plan) < 0)
        return NULL;
    if (!plan)
        Py_RETURN_FALSE;
#else
    plan = PyWeakref_GetObject(r->plan_ref);  /* borrowed */
    if (!plan)
        return NULL;
    if (plan == Py_None)
        Py_RETURN_FALSE;
    Py_INCREF(plan);
#endif
    PyObject *eng = NULL, *seq = NULL, *next = NULL, *result = NULL;
    Engine *e;
    int ok;
    if ((ok = attr_is(r->st, s_alive, Py_True)) <= 0 || (ok = attr_is(plan, s_active, Py_False)) <= 0 ||
        (ok = attr_is(recv, s_dtype, r->rdtype)) <= 0 || (!in_place && (ok = attr_is(send, s_dtype, r->sdtype)) <= 0))
        goto out;
    eng = PyObject_GetAttr(plan, in_place ? s_fast : s_fast_src);
    if (!eng) {
        ok = -1;
        goto out;
    }
    ok = 0;
    if (Py_TYPE(eng) != &EngineType)
        goto out;  /* broken, or out of place and not planned yet */
    e = (Engine *)eng;
    if (e->active)
        goto out;
    for (int i = 0; i < NBASES; i++)
        e->base[i] = NULL;
    /* bind the buffers: a failure here is a changed array (not writable, not contiguous): not an error */
    if (PyObject_GetBuffer(recv, &e->views[0], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        goto out;
    }
    e->held[0] = 1;
    if (!in_place) {
        if (PyObject_GetBuffer(send, &e->views[1], PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();
            release_views(e);
            goto out;
        }
        e->held[1] = 1;
    }
    if (e->views[0].len != r->rbytes || (!in_place && e->views[1].len != r->sbytes)) {
        release_views(e);
        goto out;
    }
    if (PyObject_GetBuffer(r->scratch, &e->views[3], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        release_views(e);
        ok = -1;
        goto out;
    }
    e->held[3] = 1;
    for (int i = 0; i < NBASES; i++)
        if (e->held[i])
            e->base[i] = e->views[i].buf;
    /* the operation's number: state.seq += 1 */
    double sleep_us;
    long long n;
    PyObject *su = PyObject_GetAttr(r->settings, s_sleep_us);
    if (!su || ((sleep_us = PyFloat_AsDouble(su)), Py_DECREF(su), sleep_us == -1.0 && PyErr_Occurred()) ||
        !(seq = PyObject_GetAttr(r->st, s_seq)) || ((n = PyLong_AsLongLong(seq)) == -1 && PyErr_Occurred()) ||
        !(next = PyLong_FromLongLong(n + 1)) || PyObject_SetAttr(r->st, s_seq, next) < 0) {
        release_views(e);
        ok = -1;
        goto out;
    }
    n += 1;
    reset(e, (int)(r->tag_base + (n % r->tag_seqs) * r->max_lanes));
    result = outcome(e, run_all(e, r->policy, r->timeout, sleep_us));
    if (result == Py_True) {
        Py_DECREF(result);
        Py_INCREF(Py_None);
        result = Py_None;
    } else if (result) {  /* raises: the plan is broken */
        PyObject *failed = PyObject_CallMethodObjArgs(plan, s_core_failed, eng, result, recv,
                                                      in_place ? Py_None : send, NULL);
        Py_DECREF(result);
        Py_XDECREF(failed);
        result = NULL;
        if (!PyErr_Occurred())
            PyErr_SetString(CoreError, "the compiled core failed");
    }
    ok = 1;
out:
    Py_DECREF(plan);
    Py_XDECREF(eng);
    Py_XDECREF(seq);
    Py_XDECREF(next);
    if (ok < 0)
        return NULL;
    if (ok == 0)
        Py_RETURN_FALSE;
    return result;
}

static int RepeatRec_init(RepeatRec *r, PyObject *args, PyObject *kw)
{
    PyObject *plan_ref, *st, *rdtype, *sdtype, *scratch, *settings;
    Py_ssize_t rbytes, sbytes;
    int policy;
    double timeout;
    long long tag_base, tag_seqs, max_lanes;
    if (!PyArg_ParseTuple(args, "OOOnOnOidOLLL", &plan_ref, &st, &rdtype, &rbytes, &sdtype, &sbytes, &scratch,
                          &policy, &timeout, &settings, &tag_base, &tag_seqs, &max_lanes))
        return -1;
    if (!PyWeakref_CheckRef(plan_ref)) {
        PyErr_SetString(PyExc_TypeError, "plan_ref: a weak reference");
        return -1;
    }
    if (tag_seqs < 1) {
        PyErr_SetString(PyExc_ValueError, "tag_seqs < 1");
        return -1;
    }
    Py_INCREF(plan_ref);
    Py_INCREF(st);
    Py_INCREF(rdtype);
    Py_INCREF(sdtype);
    Py_INCREF(scratch);
    Py_INCREF(settings);
    Py_XSETREF(r->plan_ref, plan_ref);
    Py_XSETREF(r->st, st);
    Py_XSETREF(r->rdtype, rdtype);
    Py_XSETREF(r->sdtype, sdtype);
    Py_XSETREF(r->scratch, scratch);
    Py_XSETREF(r->settings, settings);
    r->rbytes = rbytes;
    r->sbytes = sbytes;
    r->policy = policy;
    r->timeout = timeout;
    r->tag_base = tag_base;
    r->tag_seqs = tag_seqs;
    r->max_lanes = max_lanes;
    r->vectorcall = RepeatRec_call;
    return 0;
}

static PyTypeObject RepeatType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "swing_mpi_core.Repeat",
    .tp_basicsize = sizeof(RepeatRec),
    .tp_dealloc = (destructor)RepeatRec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A blocking allreduce's record for the repeat path: record(sendbuf, recvbuf, op) -> None or False.",
    .tp_vectorcall_offset = offsetof(RepeatRec, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_init = (initproc)RepeatRec_init,
    .tp_new = PyType_GenericNew,
};

/* reduce(kernel, dst, a, b, threads, min_bytes): dst = a op b through the kernels (tests and the probe) */
static PyObject *core_reduce(PyObject *self, PyObject *args)
{
    int kernel, threads;
    long long min_bytes;
    Py_buffer d, a, b;
    if (!PyArg_ParseTuple(args, "iw*y*y*iL", &kernel, &d, &a, &b, &threads, &min_bytes))
        return NULL;
    int esz = kernel_size(kernel);
    int bad = esz == 0 || a.len != d.len || b.len != d.len || d.len % esz;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        kernel_threads(kernel, d.buf, a.buf, b.buf, d.len / esz, threads, min_bytes);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&d);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "bad kernel or buffer sizes");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *core_abi(PyObject *self, PyObject *unused)
{
#if defined(OPEN_MPI)
    return PyUnicode_FromString("openmpi");
#elif defined(MPICH_VERSION)
    return PyUnicode_FromString("mpich");
#else
    return PyUnicode_FromString("other");
#endif
}

/* comm_size(comm_f): the size as this build sees the communicator (a check of the ABI) */
static PyObject *core_comm_size(PyObject *self, PyObject *args)
{
    long long f;
    int size = -1;
    if (!PyArg_ParseTuple(args, "L", &f))
        return NULL;
    if (MPI_Comm_size(MPI_Comm_f2c((MPI_Fint)f), &size) != MPI_SUCCESS)
        size = -1;
    return PyLong_FromLong(size);
}

static PyMethodDef core_methods[] = {
    {"reduce", core_reduce, METH_VARARGS, "reduce(kernel, dst, a, b, threads, min_bytes)"},
    {"abi", core_abi, METH_NOARGS, "the MPI family of the mpi.h this was compiled against"},
    {"comm_size", core_comm_size, METH_VARARGS, "comm_size(comm_f)"},
    {NULL}};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, "swing_mpi_core", NULL, -1, core_methods};

PyMODINIT_FUNC PyInit_swing_mpi_core(void)
{
    if (PyType_Ready(&EngineType) < 0 || PyType_Ready(&RepeatType) < 0)
        return NULL;
#define INTERN(v, text) if (!(v = PyUnicode_InternFromString(text))) return NULL
    INTERN(s_alive, "alive");
    INTERN(s_active, "active");
    INTERN(s_fast, "_fast");
    INTERN(s_fast_src, "_fast_src");
    INTERN(s_dtype, "dtype");
    INTERN(s_seq, "seq");
    INTERN(s_sleep_us, "sleep_us");
    INTERN(s_core_failed, "_core_failed");
#undef INTERN
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    CoreError = PyErr_NewException("swing_mpi_core.CoreError", PyExc_RuntimeError, NULL);
    Py_INCREF(&EngineType);
    PyModule_AddObject(m, "Engine", (PyObject *)&EngineType);
    Py_INCREF(&RepeatType);
    PyModule_AddObject(m, "Repeat", (PyObject *)&RepeatType);
    PyModule_AddObject(m, "CoreError", CoreError);
    PyModule_AddIntConstant(m, "MAXT", MAXT);
    return m;
}
