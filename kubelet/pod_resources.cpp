#include "kubelet/pod_resources.h"

#include "pod_resources.grpc.pb.h"

#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace ibfabric::kubelet {
namespace {

// The kubelet's own limit on what its pod-resources server sends (podresources
// DefaultMaxMsgSize, 16 MiB); gRPC's default of 4 MiB would refuse a large node's answer.
constexpr int kMaxAnswerBytes = 16 * 1024 * 1024;
// The method's HTTP/2 path: /<package>.<service>/<method> of pod_resources.proto.
constexpr std::string_view kListMethod = "/v1.PodResourcesLister/List";

std::string reason_of(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "timeout";
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "unimplemented";
    // Broken HTTP/2 or gRPC framing; an answer above the size limit.
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "malformed";
    default:
      return "other";
  }
}

}  // namespace

std::vector<DeviceAssignment> list_pod_devices(const std::string& socket_path,
                                               std::chrono::milliseconds timeout) {
  // connect() needs write permission on the socket, which is root's. Told apart from a refusal
  // because it is a deployment choice (the packaged service runs as its own user), not an
  // outage; gRPC would only say "failed to connect".
  if (::faccessat(AT_FDCWD, socket_path.c_str(), W_OK, AT_EACCESS) != 0 && errno == EACCES) {
    throw KubeletError("permission_denied",
                       "List: no write access to the socket (connecting needs it): run the "
                       "daemon as root or give its user access, or set kubelet_socket: \"\"");
  }
  grpc::ChannelArguments args;
  // Channels to the same target share subchannels (and their reconnect backoff, up to 2 min)
  // through gRPC's global pool; a private pool makes every collection really try again.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  const auto channel =
      grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);

  // The generic stub hands over the answer's bytes, which we parse ourselves: the generated
  // blocking stub reports an answer that does not parse as UNIMPLEMENTED "No message returned",
  // the same code as a kubelet without the service.
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  const auto deadline = std::chrono::system_clock::now() + timeout;
  context.set_deadline(deadline);
  const std::string request_bytes = v1::ListPodResourcesRequest().SerializeAsString();
  grpc::Slice request_slice(request_bytes);
  const grpc::ByteBuffer request(&request_slice, 1);
  grpc::CompletionQueue queue;
  const auto call = stub.PrepareUnaryCall(&context, std::string(kListMethod), request, &queue);
  call->StartCall();
  grpc::ByteBuffer answer;
  grpc::Status status;
  call->Finish(&answer, &status, &answer);
  void* tag = nullptr;
  bool ok = false;
  // The deadline ends the call; the margin only guards against a gRPC that would not.
  if (queue.AsyncNext(&tag, &ok, deadline + std::chrono::seconds(1)) !=
      grpc::CompletionQueue::GOT_EVENT) {
    context.TryCancel();
    queue.Next(&tag, &ok);
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }

  if (!status.ok()) {
    std::string what = "List: gRPC status " + std::to_string(status.error_code());
    if (!status.error_message().empty()) what += ": " + status.error_message();
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      what = "List: no answer within " + std::to_string(timeout.count()) + "ms";
    }
    throw KubeletError(reason_of(status.error_code()), what);
  }
  grpc::Slice slice;
  v1::ListPodResourcesResponse response;
  if (!answer.DumpToSingleSlice(&slice).ok() ||
      !response.ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    throw KubeletError("malformed", "List: the answer (" + std::to_string(answer.Length()) +
                                        " bytes) is not a ListPodResourcesResponse");
  }

  std::vector<DeviceAssignment> out;
  for (const auto& pod : response.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        for (const auto& id : devices.device_ids()) {
          out.push_back(
              {pod.namespace_(), pod.name(), container.name(), devices.resource_name(), id});
        }
      }
    }
  }
  return out;
}

}  // namespace ibfabric::kubelet
