// A latency model of InfiniBand management agents for benchmarks on ibsim: an LD_PRELOAD
// library stacked in front of ibsim's shim,
//
//   LD_PRELOAD="libswitch_latency.so /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
//   IBFABRIC_SWITCH_LATENCY_US=100
//
// The simulator answers a MAD within microseconds; a real switch's management agent runs on a
// small, serial CPU and takes tens to hundreds of microseconds per MAD. This library holds each
// answer back as such an agent would:
//
//   cpu_done = max(sent, previous cpu_done of the same destination) + S
//   released = max(cpu_done, when the simulator's answer reached the process)
//
// `sent` is when the process wrote the request (matched to its answer by the lower 32 bits of
// the transaction id), S is IBFABRIC_SWITCH_LATENCY_US. One destination serves one MAD at a
// time, in the order they reach it; different destinations work in parallel. So one MAD in
// flight costs S per MAD, many in flight to one destination still S each, many in flight over
// N destinations about S / N each. The simulator's own time overlaps S instead of adding to
// it (a real agent's wire time is small next to S).
//
// Destinations: a LID-routed answer belongs to the LID its request was sent to. A directed-route
// SMP belongs to the node at the end of its path: the NodeGUID once a NodeInfo answer on that
// path has named it, the path itself until then (so two paths to one switch share its CPU once
// known). The same switch by LID and by directed route counts as two destinations: that only
// matters when a program mixes both at once (none of the benchmarked ones does: discovery by
// directed route ends before the sweep by LID starts). Every node's agent gets the same S,
// CAs' included (their firmware answers SMPs and PMA queries the same way).
//
// Scope: the state is per process. A switch's CPU is also busy with the SM and with other
// processes' queries; this model sees only the calling process's MADs, which is what a
// benchmark of one tool at a time needs. Requests the process receives (not answers) pass at
// once. Answers of the SA (management class 0x03) pass at once too: the SA is the SM's host,
// not a switch's agent.
//
// Mechanics: the shim hands out fake umad descriptors 1024-2047 and implements read, write and
// poll on them. This library wraps those three (its symbols come first, the shim's are found
// with RTLD_NEXT): write stamps requests, poll and read drain the shim's queue into a
// time-ordered heap and hand out only answers whose release time has passed. poll waits with
// the shim's poll (which wakes on arrival) when the next release is a millisecond or more away,
// and with clock_nanosleep below that. One reader thread per descriptor (libibumad's programs
// and ibfabricd's engine have one). A sleeping reader wakes late on a loaded machine: with
// IBFABRIC_SWITCH_LATENCY_REPORT set, the library prints at exit how late (after its release
// time) it handed answers out, so a benchmark can tell the model's error from the tool's time.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
  kUmadHeader = 64,     // sizeof(struct ib_user_mad), libibumad ABI 5
  kAddrLidOffset = 28,  // ib_user_mad.addr.lid (network order)
  kMaxMessage = 8192,
  kFakeFdFirst = 1024,
  kFakeFdEnd = 2048,
  kTableBits = 16,
};

typedef ssize_t (*read_fn)(int, void*, size_t);
typedef ssize_t (*write_fn)(int, const void*, size_t);
typedef int (*poll_fn)(struct pollfd*, nfds_t, int);

static read_fn next_read;
static write_fn next_write;
static poll_fn next_poll;
static int64_t service_ns = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

// POSIX guarantees dlsym's object pointer converts to a function pointer; ISO C does not, so
// copy the bits (-Wpedantic).
static void* symbol(const char* name, void* out, size_t size) {
  void* p = dlsym(RTLD_NEXT, name);
  memcpy(out, &p, size);
  return p;
}

static void resolve(void) {
  if (__atomic_load_n(&next_read, __ATOMIC_ACQUIRE)) return;
  symbol("write", &next_write, sizeof next_write);
  symbol("poll", &next_poll, sizeof next_poll);
  const char* us = getenv("IBFABRIC_SWITCH_LATENCY_US");
  double v = us ? strtod(us, NULL) : 0;
  service_ns = v > 0 ? (int64_t)(v * 1000.0) : 0;
  read_fn r;
  symbol("read", &r, sizeof r);
  __atomic_store_n(&next_read, r, __ATOMIC_RELEASE);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct slot {
  uint64_t key;
  int64_t a;
  uint64_t b;
};
// Requests by the lower 32 bits of their transaction id (the shim owns the upper ones), indexed
// by its lower 16 bits: programs count transaction ids up, so two requests meet in one slot
// only with 65,536 in flight.
static struct slot sent_table[1 << kTableBits];  // trid -> (sent ns, request destination)
// Open-addressing tables with 2^16 slots, never shrunk (a fabric has at most thousands of
// destinations and paths); a full table overwrites (the model degrades, nothing breaks). Key 0
// is "empty": every key below is non-zero.
static struct slot cpu_table[1 << kTableBits];   // destination -> (cpu_done ns)
static struct slot path_table[1 << kTableBits];  // directed-route path -> (NodeGUID)

static struct slot* find(struct slot* t, uint64_t key, int insert) {
  uint64_t mask = (1u << kTableBits) - 1;
  uint64_t i = mix(key) & mask;
  for (unsigned n = 0; n < 64; ++n, i = (i + 1) & mask) {
    if (t[i].key == key) return &t[i];
    if (t[i].key == 0) {
      if (!insert) return NULL;
      t[i].key = key;
      t[i].a = 0;
      t[i].b = 0;
      return &t[i];
    }
  }
  if (!insert) return NULL;
  struct slot* s = &t[mix(key) & mask];
  s->key = key;
  s->a = 0;
  s->b = 0;
  return s;
}

static uint64_t get_be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

// Destination keys: tag in the top two bits so LIDs, paths and GUIDs never meet.
static uint64_t lid_key(uint16_t lid) { return 1ULL << 62 | lid; }
static uint64_t guid_key(uint64_t guid) { return 2ULL << 62 | (guid & ~(3ULL << 62)); }
// A directed route: the outgoing ports after the local node (initial path octets 1..hop count).
static uint64_t path_key(const uint8_t* mad) {
  int hops = mad[7] & 0x3f;
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)hops;
  for (int i = 1; i <= hops; ++i) h = mix(h ^ mad[128 + i]);
  return 3ULL << 62 | (h & ~(3ULL << 62)) | 1;
}

static int is_directed(const uint8_t* mad) { return mad[1] == 0x81; }

static uint64_t request_destination(const uint8_t* umad) {
  const uint8_t* mad = umad + kUmadHeader;
  if (is_directed(mad)) return path_key(mad);
  return lid_key((uint16_t)get_be(umad + kAddrLidOffset, 2));
}

// --- answers held back, per descriptor: a binary heap ordered by (release, arrival order) ---

struct held {
  int64_t release;
  int64_t arrived;
  uint64_t seq;
  size_t size;
  uint8_t* data;
};
struct queue {
  struct held* items;
  size_t count, cap;
};
static struct queue queues[kFakeFdEnd - kFakeFdFirst];

// How well the model keeps time: how long after its release time each message was handed out
// (wake-up latency of this process). Printed at exit when IBFABRIC_SWITCH_LATENCY_REPORT is set.
static struct {
  uint64_t answers, held;
  int64_t late_sum, late_max;
} stats;

__attribute__((destructor)) static void report(void) {
  if (!getenv("IBFABRIC_SWITCH_LATENCY_REPORT")) return;
  pthread_mutex_lock(&lock);
  fprintf(stderr, "switch_latency: answers=%llu held=%llu late_mean_us=%.1f late_max_us=%.1f\n",
          (unsigned long long)stats.answers, (unsigned long long)stats.held,
          stats.answers ? (double)stats.late_sum / (double)stats.answers / 1000.0 : 0.0,
          (double)stats.late_max / 1000.0);
  pthread_mutex_unlock(&lock);
}
static uint64_t seq;

static int before(const struct held* x, const struct held* y) {
  return x->release < y->release || (x->release == y->release && x->seq < y->seq);
}

static void push(struct queue* q, struct held h) {
  if (q->count == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 64;
    struct held* items = realloc(q->items, cap * sizeof *items);
    if (!items) {
      free(h.data);  // out of memory: the answer is lost, like a dropped MAD
      return;
    }
    q->items = items;
    q->cap = cap;
  }
  size_t i = q->count++;
  while (i > 0 && before(&h, &q->items[(i - 1) / 2])) {
    q->items[i] = q->items[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  q->items[i] = h;
}

static struct held pop(struct queue* q) {
  struct held top = q->items[0];
  struct held last = q->items[--q->count];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= q->count) break;
    if (c + 1 < q->count && before(&q->items[c + 1], &q->items[c])) ++c;
    if (!before(&q->items[c], &last)) break;
    q->items[i] = q->items[c];
    i = c;
  }
  if (q->count) q->items[i] = last;
  return top;
}

// The release time of one message read from the shim (lock held).
static int64_t release_time(const uint8_t* umad, size_t size, int64_t arrived) {
  if (size < kUmadHeader + 24) return arrived;
  const uint8_t* mad = umad + kUmadHeader;
  if (!(mad[3] & 0x80)) return arrived;  // a request to this process, not an answer
  // The SA runs on the SM's host, not on a switch's management CPU: its answers (and the RMPP
  // segments of a table, bench/sa_rmpp) are not held back.
  if (mad[1] == 0x03) return arrived;
  uint64_t trid = get_be(mad + 12, 4);
  struct slot* s = &sent_table[trid & ((1u << kTableBits) - 1)];
  int64_t sent = arrived;  // an answer to nothing we saw sent: timed from its arrival
  uint64_t dest = 0;
  if (s->key == (trid | 1ULL << 63)) {
    sent = s->a;
    dest = s->b;
    s->key = 0;
  }
  if (is_directed(mad) && size >= kUmadHeader + 256) {
    uint64_t path = path_key(mad);
    uint16_t attr = (uint16_t)get_be(mad + 16, 2);
    uint16_t status = (uint16_t)get_be(mad + 4, 2) & 0x7fff;
    if (attr == 0x0011 && status == 0) {  // NodeInfo names the node at the end of the path
      find(path_table, path, 1)->b = get_be(mad + 64 + 12, 8);
    }
    struct slot* p = find(path_table, path, 0);
    dest = p ? guid_key(p->b) : path;
  } else if (!dest) {
    dest = lid_key((uint16_t)get_be(umad + kAddrLidOffset, 2));
  }
  struct slot* cpu = find(cpu_table, dest, 1);
  int64_t start = sent > cpu->a ? sent : cpu->a;
  cpu->a = start + service_ns;
  return cpu->a > arrived ? cpu->a : arrived;
}

// Moves everything the shim has for `fd` into its heap (lock held).
static void drain(int fd) {
  struct queue* q = &queues[fd - kFakeFdFirst];
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (next_poll(&p, 1, 0) <= 0) return;
    uint8_t* buf = malloc(kMaxMessage);
    if (!buf) return;
    ssize_t n = next_read(fd, buf, kMaxMessage);
    if (n <= 0) {
      free(buf);
      return;
    }
    int64_t arrived = now_ns();
    struct held h = {release_time(buf, (size_t)n, arrived), arrived, seq++, (size_t)n, buf};
    push(q, h);
  }
}

static int fake(int fd) { return fd >= kFakeFdFirst && fd < kFakeFdEnd; }

ssize_t write(int fd, const void* buf, size_t count) {
  resolve();
  if (fake(fd) && count >= kUmadHeader + 24) {
    const uint8_t* umad = buf;
    const uint8_t* mad = umad + kUmadHeader;
    if (!(mad[3] & 0x80)) {
      pthread_mutex_lock(&lock);
      uint64_t trid = get_be(mad + 12, 4);
      struct slot* s = &sent_table[trid & ((1u << kTableBits) - 1)];
      s->key = trid | 1ULL << 63;
      s->a = now_ns();
      s->b = request_destination(umad);
      pthread_mutex_unlock(&lock);
    }
  }
  return next_write(fd, buf, count);
}

ssize_t read(int fd, void* buf, size_t count) {
  resolve();
  if (!fake(fd)) return next_read(fd, buf, count);
  pthread_mutex_lock(&lock);
  drain(fd);
  struct queue* q = &queues[fd - kFakeFdFirst];
  if (!q->count || q->items[0].release > now_ns()) {
    pthread_mutex_unlock(&lock);
    return -EWOULDBLOCK;  // what the shim returns for an empty queue
  }
  struct held h = pop(q);
  int64_t late = now_ns() - h.release;
  ++stats.answers;
  stats.held += h.release > h.arrived;
  stats.late_sum += late;
  if (late > stats.late_max) stats.late_max = late;
  pthread_mutex_unlock(&lock);
  size_t n = h.size < count ? h.size : count;
  memcpy(buf, h.data, n);
  free(h.data);
  return (ssize_t)n;
}

int poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  resolve();
  struct pollfd* mine = NULL;
  for (nfds_t i = 0; i < nfds; ++i) {
    if (fake(fds[i].fd)) mine = &fds[i];
  }
  if (!mine) return next_poll(fds, nfds, timeout);
  int64_t deadline = timeout < 0 ? INT64_MAX : now_ns() + (int64_t)timeout * 1000000;
  struct queue* q = &queues[mine->fd - kFakeFdFirst];
  for (;;) {
    pthread_mutex_lock(&lock);
    drain(mine->fd);
    int64_t next = q->count ? q->items[0].release : INT64_MAX;
    pthread_mutex_unlock(&lock);
    int64_t now = now_ns();
    mine->revents = 0;
    if (next <= now) {
      mine->revents = POLLIN;
      return 1;
    }
    int64_t wake = next < deadline ? next : deadline;
    if (wake <= now) return 0;
    if (wake == INT64_MAX || wake - now >= 1000000) {
      // The shim's poll returns at the next arrival or after the whole milliseconds.
      int ms = wake == INT64_MAX ? -1 : (int)((wake - now) / 1000000);
      struct pollfd p = {mine->fd, POLLIN, 0};
      if (next_poll(&p, 1, ms) < 0) return -1;
    } else {
      struct timespec ts = {(time_t)(wake / 1000000000), (long)(wake % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      }
    }
  }
}
