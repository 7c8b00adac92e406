// A stand-in for the kubelet's pod-resources endpoint, for integration tests: serves
// PodResourcesLister List (kubelet/pod_resources.proto, the kubelet's v1 wire format)
// on a Unix socket, answering what a text file says at the time of each call, so a test can
// add and remove pods while the daemon runs.
//
//   fake_kubelet SOCKET ANSWER_FILE
//
// ANSWER_FILE: one device per line, "namespace pod container resource device_id"; blank lines
// and lines starting with # are skipped. A missing file answers no pods. Prints "serving" once
// the socket accepts calls; stops on SIGTERM or SIGINT.

#include "pod_resources.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

class Lister final : public v1::PodResourcesLister::Service {
 public:
  explicit Lister(std::string path) : path_(std::move(path)) {}

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string namespace_name, pod_name, container_name, resource, device;
      if (!(fields >> namespace_name >> pod_name >> container_name >> resource >> device)) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "bad answer line: " + line);
      }
      v1::PodResources* pod = nullptr;
      for (auto& p : *response->mutable_pod_resources()) {
        if (p.name() == pod_name && p.namespace_() == namespace_name) pod = &p;
      }
      if (!pod) {
        pod = response->add_pod_resources();
        pod->set_name(pod_name);
        pod->set_namespace_(namespace_name);
      }
      auto* container = pod->add_containers();
      container->set_name(container_name);
      auto* devices = container->add_devices();
      devices->set_resource_name(resource);
      devices->add_device_ids(device);
    }
    return grpc::Status::OK;
  }

 private:
  std::string path_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fake_kubelet SOCKET ANSWER_FILE\n";
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before gRPC starts its threads

  Lister lister(argv[2]);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix:") + argv[1], grpc::InsecureServerCredentials());
  builder.RegisterService(&lister);
  const auto server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "fake_kubelet: cannot serve on " << argv[1] << "\n";
    return 1;
  }
  std::cout << "serving" << std::endl;
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  server->Shutdown();
  return 0;
}
