#include "collectors/sysfs/attribute_reader.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ibfabric::sysfs {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kMaxText = 65536;  // not a sysfs attribute; the parser will refuse it

// Reads from offset 0. An attribute is at most a page, so a short read is the whole of it.
int read_from_start(int fd, std::string& text) {
  text.clear();
  char buffer[kPage];
  for (;;) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (n < static_cast<ssize_t>(sizeof buffer) || text.size() >= kMaxText) return 0;
  }
}

}  // namespace

AttributeReader::AttributeReader(std::size_t max_open) : max_open_(max_open) {}

AttributeReader::~AttributeReader() {
  for (auto& [_, file] : open_) ::close(file.fd);
}

FileContent AttributeReader::read(const std::string& path) {
  FileContent content;
  if (auto it = open_.find(path); it != open_.end()) {
    it->second.used = true;
    content.error = read_from_start(it->second.fd, content.text);
    if (content.error == 0) return content;
    // Gone or replaced (driver reload): forget it and try the path afresh.
    ::close(it->second.fd);
    open_.erase(it);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {{}, errno};
  content.error = read_from_start(fd, content.text);
  if (content.error == 0 && open_.size() < max_open_) {
    open_.emplace(path, Open{fd, true});
  } else {
    ::close(fd);
  }
  return content;
}

void AttributeReader::close_unused() {
  for (auto it = open_.begin(); it != open_.end();) {
    if (!it->second.used) {
      ::close(it->second.fd);
      it = open_.erase(it);
    } else {
      it->second.used = false;
      ++it;
    }
  }
}

std::size_t default_max_open_attributes() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 4096;
  return std::min<std::size_t>(4096, static_cast<std::size_t>(limit.rlim_cur) / 4);
}

}  // namespace ibfabric::sysfs
