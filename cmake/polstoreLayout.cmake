# SPDX-License-Identifier: LGPL-2.1-or-later
# polstore_layout_id(<var>): the identity of the layouts the inline read
# side reads (include/polstore/static/layout.h, ps_inline_layout()) as the
# compiler lays them out, 8 hex digits.  cmake/layout_id.c is compiled into
# a static archive, never run (so a cross build gets the target's
# identity), and the string it holds is read back; -fno-lto keeps real data
# in the object.  The build records the identity (pkg-config, the CMake
# package, the Debian packages) and store.c checks that it is the one the
# library accepts.
function(polstore_layout_id var)
	set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
	set(archive ${PROJECT_BINARY_DIR}/CMakeFiles/polstore-layout-id.a)
	try_compile(ok ${PROJECT_BINARY_DIR}/CMakeFiles/polstore-layout-id
		${PROJECT_SOURCE_DIR}/cmake/layout_id.c
		COMPILE_DEFINITIONS -fno-lto -I${PROJECT_SOURCE_DIR}/include
			-I${PROJECT_BINARY_DIR}/include
		COPY_FILE ${archive}
		OUTPUT_VARIABLE log)
	if(NOT ok)
		message(FATAL_ERROR "cannot compute the inline layout identity:\n${log}")
	endif()
	file(STRINGS ${archive} id REGEX "POLSTORE_LAYOUT=[0-9a-f]+")
	string(REGEX REPLACE ".*POLSTORE_LAYOUT=([0-9a-f]+).*" "\\1" id "${id}")
	if(NOT id MATCHES "^[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]$")
		message(FATAL_ERROR "no inline layout identity in ${archive}: '${id}'")
	endif()
	set(${var} ${id} PARENT_SCOPE)
endfunction()
