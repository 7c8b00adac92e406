#pragma once
// A kubelet inside the test binary, for the collectors that ask it (sriov, pods): a real gRPC
// C++ server of the kubelet's pod-resources v1 service (kubelet/pod_resources.proto) on a Unix
// socket, answering what the test sets, or bytes that do not parse; and a server without the
// service.

#include "pod_resources.grpc.pb.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ibfabric::test_support {

struct Held {
  std::string namespace_name, pod, container, resource;
  std::vector<std::string> device_ids;
};

inline v1::ListPodResourcesResponse answer(const std::vector<Held>& held) {
  v1::ListPodResourcesResponse response;
  for (const auto& h : held) {
    v1::PodResources* pod = nullptr;
    for (auto& existing : *response.mutable_pod_resources()) {
      if (existing.name() == h.pod && existing.namespace_() == h.namespace_name) pod = &existing;
    }
    if (!pod) {
      pod = response.add_pod_resources();
      pod->set_name(h.pod);
      pod->set_namespace_(h.namespace_name);
    }
    auto* container = pod->add_containers();
    container->set_name(h.container);
    container->add_cpu_ids(4);
    auto* devices = container->add_devices();
    devices->set_resource_name(h.resource);
    for (const auto& id : h.device_ids) devices->add_device_ids(id);
    devices->mutable_topology()->add_nodes()->set_id(1);
  }
  return response;
}

// The kubelet's PodResourcesLister, answering what the test sets.
class FakeKubelet final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    std::lock_guard lock(mutex_);
    ++calls_;
    *response = answer_;
    if (garbled_) {
      // Field 1 (pod_resources) whose bytes are a varint cut short: valid HTTP/2 and gRPC
      // framing around a message that does not parse.
      response->GetReflection()->MutableUnknownFields(response)->AddLengthDelimited(
          1, std::string("\xff\xff\xff", 3));
    }
    return grpc::Status::OK;
  }
  void answer_with(v1::ListPodResourcesResponse response) {
    std::lock_guard lock(mutex_);
    answer_ = std::move(response);
    garbled_ = false;
  }
  void garble() {
    std::lock_guard lock(mutex_);
    garbled_ = true;
  }
  int calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  std::mutex mutex_;
  v1::ListPodResourcesResponse answer_;
  bool garbled_ = false;
  int calls_ = 0;
};

// A gRPC server on a Unix socket; `service` null: a server without the pod-resources service
// (a kubelet that does not serve v1), answering every call UNIMPLEMENTED.
class GrpcServer {
 public:
  GrpcServer(const std::string& socket, grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    if (service) {
      builder.RegisterService(service);
    } else {
      builder.RegisterCallbackGenericService(&unimplemented_);
    }
    server_ = builder.BuildAndStart();
    EXPECT_TRUE(server_) << "cannot serve on " << socket;
  }
  ~GrpcServer() { stop(); }
  void stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }

 private:
  grpc::CallbackGenericService unimplemented_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace ibfabric::test_support
