# SPDX-License-Identifier: Apache-2.0
# TD_SANITIZE=address -> ASan+UBSan; TD_SANITIZE=thread -> TSan. Applied to every C target.
if(TD_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(TD_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(TD_SANITIZE)
  message(FATAL_ERROR "TD_SANITIZE must be address or thread, not '${TD_SANITIZE}'")
endif()
