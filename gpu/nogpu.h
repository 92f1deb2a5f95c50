/* nogpu.h: the one message every GPU entry point answers with (MLR_EDEVICE) in a build without
 * GPU support (MLAREF_GPU=OFF, or no toolkit found). */
#ifndef MLR_NOGPU_H
#define MLR_NOGPU_H

#define MLR__NO_GPU                                                                                \
  "this mlaref was built without GPU support (configure with -DMLAREF_GPU=CUDA or "                \
  "-DMLAREF_GPU=HIP)"

#endif
