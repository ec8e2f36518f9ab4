// A small OpenCL host driver for the generated kernels (kernels/backends/cuda/codegen): builds a kernel's
// text as OpenCL C, binds its parameters in the order kernelForCall gives them (the CUDA launcher
// binds the same), runs it and copies the output back. With PoCL it runs on the CPU with real
// work-groups, local memory and barriers; under oclgrind every access is checked.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "kernels/backends/cuda/codegen/call.h"

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace tsfuse_gpu {

class ClDriver {
 public:
  // The first device of the first platform (PoCL's CPU device, or oclgrind's when run under it);
  // nullptr with the reason when there is none.
  static ClDriver* get(std::string* why) {
    static std::string reason;
    static ClDriver* d = [] {
      auto* drv = new ClDriver;
      cl_platform_id pl;
      cl_uint n = 0;
      if (clGetPlatformIDs(1, &pl, &n) != CL_SUCCESS || n == 0) {
        reason = "no OpenCL platform (install pocl-opencl-icd: scripts/setup.sh)";
        return static_cast<ClDriver*>(nullptr);
      }
      if (clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &drv->dev, &n) != CL_SUCCESS || n == 0) {
        reason = "no OpenCL device";
        return static_cast<ClDriver*>(nullptr);
      }
      cl_int err;
      drv->ctx = clCreateContext(nullptr, 1, &drv->dev, nullptr, nullptr, &err);
      if (err == CL_SUCCESS) drv->queue = clCreateCommandQueue(drv->ctx, drv->dev, 0, &err);
      if (err != CL_SUCCESS) {
        reason = "OpenCL context: error " + std::to_string(err);
        return static_cast<ClDriver*>(nullptr);
      }
      char name[256] = {};
      clGetDeviceInfo(drv->dev, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
      drv->deviceName = name;
      return drv;
    }();
    if (!d && why) *why = reason;
    return d;
  }

  std::string deviceName;
  int builds = 0;

  // Runs k over `ops` into `outs` (dense, numOut elements each: the values, then max/min's
  // indices) with `blocks` work-groups of `blockSize` work-items (the grid-stride loops cover the
  // rest). "" or what failed.
  std::string run(const tsfuse::cuda::CallKernel& k, at::TensorList ops, std::vector<at::Tensor> outs, int64_t blocks,
                  int blockSize) {
    cl_kernel kern = nullptr;
    if (std::string err = kernelOf(k, kern); !err.empty()) return err;
    std::vector<cl_mem> mems;
    auto cleanup = [&] {
      for (cl_mem m : mems) clReleaseMemObject(m);
    };
    auto buffer = [&](size_t bytes, const void* host) {
      cl_int e;
      cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes ? bytes : 8,
                                bytes && host ? const_cast<void*>(host) : nullptr, &e);
      mems.push_back(m);
      return m;
    };
    auto bytesOf = [](const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); };
    std::vector<cl_mem> outMems;
    const std::vector<tsfuse::cuda::HostArg> values =
        tsfuse::cuda::valueArgs(k, ops);  // as the CUDA launcher binds them
    cl_int err = CL_SUCCESS;
    for (size_t i = 0; i < k.source.params.size() && err == CL_SUCCESS; ++i) {
      const auto& p = k.source.params[i];
      const cl_uint at = static_cast<cl_uint>(i);
      switch (p.kind) {
        case tsfuse::cuda::Param::Out: {
          cl_mem m = buffer(bytesOf(outs.at(p.leaf)), nullptr);
          outMems.push_back(m);
          err = clSetKernelArg(kern, at, sizeof m, &m);
          break;
        }
        case tsfuse::cuda::Param::Data: {
          const at::Tensor& t = ops[p.leaf];
          int64_t span = t.numel() ? 1 : 0;  // elements from data_ptr to the last one reached
          for (int64_t d = 0; d < t.dim() && t.numel(); ++d) span += (t.size(d) - 1) * t.stride(d);
          cl_mem m = buffer(static_cast<size_t>(span) * t.element_size(), t.const_data_ptr());
          err = clSetKernelArg(kern, at, sizeof m, &m);
          break;
        }
        case tsfuse::cuda::Param::HostValue:
        case tsfuse::cuda::Param::Literal:
        case tsfuse::cuda::Param::Index:
          err = clSetKernelArg(kern, at, values[i].size, values[i].bytes);
          break;
      }
    }
    if (err != CL_SUCCESS) {
      cleanup();
      return "clSetKernelArg: error " + std::to_string(err);
    }
    if (k.numOut > 0) {
      const size_t local = static_cast<size_t>(blockSize), global = static_cast<size_t>(blocks) * local;
      err = clEnqueueNDRangeKernel(queue, kern, 1, nullptr, &global, &local, 0, nullptr, nullptr);
      for (size_t o = 0; o < outMems.size() && err == CL_SUCCESS; ++o)
        if (bytesOf(outs[o]))
          err = clEnqueueReadBuffer(queue, outMems[o], CL_TRUE, 0, bytesOf(outs[o]), outs[o].data_ptr(), 0, nullptr,
                                    nullptr);
      if (err == CL_SUCCESS) err = clFinish(queue);
    }
    cleanup();
    return err == CL_SUCCESS ? "" : "enqueue: error " + std::to_string(err);
  }

 private:
  cl_device_id dev = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  std::map<uint64_t, cl_kernel> kernels_;

  std::string kernelOf(const tsfuse::cuda::CallKernel& k, cl_kernel& out) {
    if (auto it = kernels_.find(k.source.hash); it != kernels_.end()) {
      out = it->second;
      return "";
    }
    const char* src = k.source.text.c_str();
    cl_int err;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
    // Correctly rounded float division and square root, as CUDA's defaults and the CPU's.
    err = clBuildProgram(prog, 1, &dev, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt", nullptr, nullptr);
    ++builds;
    if (err != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      clReleaseProgram(prog);
      return "OpenCL build failed: " + log;
    }
    out = clCreateKernel(prog, k.source.name.c_str(), &err);
    clReleaseProgram(prog);  // the kernel keeps it
    if (err != CL_SUCCESS) return "clCreateKernel: error " + std::to_string(err);
    kernels_.emplace(k.source.hash, out);
    return "";
  }
};

}  // namespace tsfuse_gpu
