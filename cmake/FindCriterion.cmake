# SPDX-License-Identifier: LGPL-2.1-or-later
# find_package(Criterion): the Criterion unit-test framework (Debian:
# libcriterion-dev), as the imported target Criterion::Criterion.
# Sets Criterion_FOUND, Criterion_VERSION (when criterion.pc says it),
# CRITERION_INCLUDE_DIR and CRITERION_LIB (cache: set them to use another
# copy).  CMAKE_DISABLE_FIND_PACKAGE_Criterion=ON hides it.
find_path(CRITERION_INCLUDE_DIR criterion/criterion.h)
find_library(CRITERION_LIB criterion)
mark_as_advanced(CRITERION_INCLUDE_DIR CRITERION_LIB)

if(CRITERION_INCLUDE_DIR AND EXISTS "${CRITERION_INCLUDE_DIR}/criterion/criterion.h")
	get_filename_component(_ps_crit_libdir "${CRITERION_LIB}" DIRECTORY)
	if(EXISTS "${_ps_crit_libdir}/pkgconfig/criterion.pc")
		file(STRINGS "${_ps_crit_libdir}/pkgconfig/criterion.pc" _ps_crit_version
			REGEX "^Version:")
		string(REGEX REPLACE "^Version:[ \t]*" "" Criterion_VERSION "${_ps_crit_version}")
	endif()
	unset(_ps_crit_libdir)
	unset(_ps_crit_version)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Criterion
	REQUIRED_VARS CRITERION_LIB CRITERION_INCLUDE_DIR
	VERSION_VAR Criterion_VERSION)

if(Criterion_FOUND AND NOT TARGET Criterion::Criterion)
	add_library(Criterion::Criterion UNKNOWN IMPORTED)
	set_target_properties(Criterion::Criterion PROPERTIES
		IMPORTED_LOCATION "${CRITERION_LIB}"
		INTERFACE_INCLUDE_DIRECTORIES "${CRITERION_INCLUDE_DIR}")
endif()
