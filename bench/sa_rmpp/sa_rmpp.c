// RMPP for SA tables on ibsim, for benchmarks: an LD_PRELOAD library stacked in front of ibsim's
// shim, in the SM's process and in the process that reads the table,
//
//   LD_PRELOAD="libsa_rmpp.so /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
//
// The shim carries one MAD of at most 256 octets per write: an SA answer longer than that (a
// GetTableResp of more than two PortInfoRecords) arrives cut to its first 256 octets. On a host
// the SM's kernel sends such an answer as RMPP segments and the requester's kernel reassembles
// them into one buffer. This library does both halves in user space, so that a benchmark on the
// simulator can read a whole table as a host would:
//
//   sender    a write() of an SA GetTableResp (class 0x03, method 0x92) becomes one write per RMPP
//             DATA segment: the MAD, RMPP and SA headers (56 octets), then 168 octets of the
//             records each (RMPP's are 200, but the shim carries only a MAD's first 224 octets); segment numbers from 1, Active and First on the first, Active and
//             Last on the last, PayloadLength (SA header + records) on the first;
//   reader    a read() that gets a first segment without Last reads on (waiting in the shim's
//             poll, 1 s at most in all) until the last segment of that transaction, keeps every
//             other MAD read meanwhile for the next reads, and returns the table whole: the
//             umad header, the 56 octets of headers, the records, as the kernel would. A buffer
//             too small gets ENOSPC and the length, as from the kernel, and the table stays for
//             the next read. poll() says a descriptor is readable while something is kept.
//
// No ACKs, windows or retransmission: ibsim loses nothing unless told to (`Error`); a segment
// that never comes ends the wait after 1 s with the records that did. One reader per descriptor.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
  kUmadHeader = 64,  // sizeof(struct ib_user_mad), libibumad ABI 5
  kMad = 256,
  kHeaders = 56,  // MAD header 24, RMPP header 12, SA header 20
  // The shim carries only the first 224 octets of a MAD (SIMULATOR.md), so a segment carries
  // 168 octets of records here, not RMPP's 200.
  kCarried = 224,
  kSegmentData = kCarried - kHeaders,
  kSaClass = 0x03,
  kFakeFdFirst = 1024,
  kFakeFdEnd = 2048,
  kFlagActive = 1,
  kFlagFirst = 2,
  kFlagLast = 4,
  kWaitMs = 1000,
};

static ssize_t (*next_read)(int, void*, size_t);
static ssize_t (*next_write)(int, const void*, size_t);
static int (*next_poll)(struct pollfd*, nfds_t, int);
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

// POSIX guarantees dlsym's object pointer converts to a function pointer; ISO C does not, so
// copy the bits (-Wpedantic).
static void symbol(const char* name, void* out, size_t size) {
  void* p = dlsym(RTLD_NEXT, name);
  memcpy(out, &p, size);
}

static void init(void) {
  symbol("read", &next_read, sizeof next_read);
  symbol("write", &next_write, sizeof next_write);
  symbol("poll", &next_poll, sizeof next_poll);
}

static int fake(int fd) { return fd >= kFakeFdFirst && fd < kFakeFdEnd; }

static uint32_t be32(const uint8_t* p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_be32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

// A message kept for a later read: umad header and MAD, `size` octets.
struct kept {
  int fd;
  uint8_t* data;
  size_t size;
  struct kept* next;
};
static struct kept* kept_head;

static void keep(int fd, uint8_t* data, size_t size, int front) {
  struct kept* k = malloc(sizeof *k);
  if (!k) {
    free(data);
    return;
  }
  k->fd = fd;
  k->data = data;
  k->size = size;
  k->next = NULL;
  pthread_mutex_lock(&lock);
  if (front || !kept_head) {
    k->next = front ? kept_head : NULL;
    kept_head = k;
  } else {
    struct kept* t = kept_head;
    while (t->next) t = t->next;
    t->next = k;
  }
  pthread_mutex_unlock(&lock);
}

static struct kept* take(int fd) {
  pthread_mutex_lock(&lock);
  struct kept** at = &kept_head;
  while (*at && (*at)->fd != fd) at = &(*at)->next;
  struct kept* k = *at;
  if (k) *at = k->next;
  pthread_mutex_unlock(&lock);
  return k;
}

static int has_kept(int fd) {
  pthread_mutex_lock(&lock);
  struct kept* k = kept_head;
  while (k && k->fd != fd) k = k->next;
  pthread_mutex_unlock(&lock);
  return k != NULL;
}

static int sa_response(const uint8_t* mad) { return mad[1] == kSaClass && (mad[3] & 0x80); }
static int sa_table(const uint8_t* mad) { return mad[1] == kSaClass && mad[3] == 0x92; }

ssize_t write(int fd, const void* buf, size_t count) {
  pthread_once(&once, init);
  const uint8_t* in = buf;
  if (!fake(fd) || count <= kUmadHeader + kHeaders || !sa_table(in + kUmadHeader)) {
    return next_write(fd, buf, count);
  }
  size_t data = count - kUmadHeader - kHeaders;
  size_t segments = data ? (data + kSegmentData - 1) / kSegmentData : 1;
  uint8_t out[kUmadHeader + kMad];
  for (size_t s = 0; s < segments; ++s) {
    memset(out, 0, sizeof out);
    memcpy(out, in, kUmadHeader + kHeaders);
    uint8_t* mad = out + kUmadHeader;
    mad[24] = 1;  // RMPPVersion
    mad[25] = 1;  // RMPPType DATA
    mad[26] = (uint8_t)((mad[26] & 0xf8) | kFlagActive | (s == 0 ? kFlagFirst : 0) |
                        (s + 1 == segments ? kFlagLast : 0));
    mad[27] = 0;
    put_be32(mad + 28, (uint32_t)(s + 1));
    put_be32(mad + 32, s == 0 ? (uint32_t)(20 + data) : 0);
    size_t at = s * kSegmentData;
    size_t n = data - at < kSegmentData ? data - at : kSegmentData;
    memcpy(mad + kHeaders, in + kUmadHeader + kHeaders + at, n);
    ssize_t w = next_write(fd, out, sizeof out);
    if (w < 0) return w;
  }
  return (ssize_t)count;
}

static void deliver_length(uint8_t* umad, size_t size) {
  // ib_user_mad.length (after agent_id, status, timeout_ms, retries; host order): the whole
  // message, umad header included.
  uint32_t length = (uint32_t)size;
  memcpy(umad + 16, &length, sizeof length);
}

// Hands `k` to a reader with `count` octets of room; ENOSPC (k kept in front) when too small.
static ssize_t hand_out(int fd, struct kept* k, void* buf, size_t count) {
  if (k->size > count) {
    if (count >= kUmadHeader) memcpy(buf, k->data, kUmadHeader);
    keep(fd, k->data, k->size, 1);
    free(k);
    errno = ENOSPC;
    return -1;
  }
  memcpy(buf, k->data, k->size);
  ssize_t n = (ssize_t)k->size;
  free(k->data);
  free(k);
  return n;
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

ssize_t read(int fd, void* buf, size_t count) {
  pthread_once(&once, init);
  if (!fake(fd)) return next_read(fd, buf, count);
  struct kept* k = take(fd);
  if (k) return hand_out(fd, k, buf, count);
  uint8_t first[kUmadHeader + kMad];
  ssize_t n = next_read(fd, first, sizeof first);
  if (n <= kUmadHeader + kHeaders) {
    if (n > 0) memcpy(buf, first, (size_t)n < count ? (size_t)n : count);
    return n;
  }
  const uint8_t* mad = first + kUmadHeader;
  int flags = mad[26] & 7;
  if (!sa_response(mad) || mad[24] == 0 || !(flags & kFlagActive) || !(flags & kFlagFirst) ||
      (flags & kFlagLast)) {
    size_t c = (size_t)n < count ? (size_t)n : count;
    memcpy(buf, first, c);
    return (ssize_t)c;
  }
  // A first segment of more: the table, reassembled.
  size_t data = be32(mad + 32) > 20 ? be32(mad + 32) - 20 : 0;
  size_t total = kUmadHeader + kHeaders + data;
  uint8_t* whole = calloc(1, total);
  if (!whole) return -1;
  memcpy(whole, first, kUmadHeader + kHeaders);
  size_t got = data < kSegmentData ? data : kSegmentData;
  memcpy(whole + kUmadHeader + kHeaders, mad + kHeaders, got);
  size_t have = got;  // contiguous octets of records so far
  int64_t deadline = now_ms() + kWaitMs;
  while (have < data) {
    int64_t left = deadline - now_ms();
    if (left <= 0) break;
    struct pollfd p = {fd, POLLIN, 0};
    if (next_poll(&p, 1, (int)left) <= 0) continue;
    uint8_t seg[kUmadHeader + kMad];
    ssize_t m = next_read(fd, seg, sizeof seg);
    if (m <= kUmadHeader + kHeaders) continue;
    const uint8_t* s = seg + kUmadHeader;
    if (!sa_response(s) || memcmp(s + 8, mad + 8, 8) != 0 || s[24] == 0) {
      uint8_t* other = malloc((size_t)m);
      if (other) {
        memcpy(other, seg, (size_t)m);
        keep(fd, other, (size_t)m, 0);
      }
      continue;
    }
    size_t at = (be32(s + 28) - 1) * (size_t)kSegmentData;
    if (at >= data) continue;
    size_t len = data - at < kSegmentData ? data - at : kSegmentData;
    memcpy(whole + kUmadHeader + kHeaders + at, s + kHeaders, len);
    if (at == have) have += len;
    if (s[26] & kFlagLast) break;
  }
  total = kUmadHeader + kHeaders + have;
  uint8_t* out_mad = whole + kUmadHeader;
  out_mad[26] = (uint8_t)((out_mad[26] & 0xf8) | kFlagActive | kFlagFirst | kFlagLast);
  deliver_length(whole, total);
  struct kept* t = malloc(sizeof *t);
  if (!t) {
    free(whole);
    return -1;
  }
  t->fd = fd;
  t->data = whole;
  t->size = total;
  t->next = NULL;
  return hand_out(fd, t, buf, count);
}

int poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  pthread_once(&once, init);
  for (nfds_t i = 0; i < nfds; ++i) {
    if (fake(fds[i].fd) && has_kept(fds[i].fd)) {
      for (nfds_t j = 0; j < nfds; ++j) fds[j].revents = 0;
      fds[i].revents = POLLIN;
      return 1;
    }
  }
  return next_poll(fds, nfds, timeout);
}
