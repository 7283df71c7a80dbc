# SPDX-License-Identifier: LGPL-2.1-or-later
# polstore's dependencies as imported targets under names of polstore's own,
# PkgConfig::_polstore_<name>: the names polstore's exported targets link.
# polstore's build makes them with this file, and so does a consumer's
# find_package(polstore) with the installed copy beside polstoreConfig.cmake.
# Everything happens inside functions: the caller's variables are left alone
# (pkg-config's answers live in the targets and in cache entries named
# after the private prefix).

# _polstore_dependency(<name> <module> <found>): the target
# PkgConfig::_polstore_<name> for the pkg-config module <module>, made once
# per directory; <found> is set to TRUE or FALSE.  The module's version is
# the target's property POLSTORE_VERSION.
function(_polstore_dependency name module found)
	if(NOT TARGET PkgConfig::_polstore_${name})
		find_package(PkgConfig QUIET)
		if(PKG_CONFIG_FOUND)
			pkg_check_modules(_polstore_${name} QUIET IMPORTED_TARGET ${module})
		endif()
		if(TARGET PkgConfig::_polstore_${name})
			set_property(TARGET PkgConfig::_polstore_${name}
				PROPERTY POLSTORE_VERSION "${_polstore_${name}_VERSION}")
		endif()
	endif()
	if(TARGET PkgConfig::_polstore_${name})
		set(${found} TRUE PARENT_SCOPE)
	else()
		set(${found} FALSE PARENT_SCOPE)
	endif()
endfunction()

# _polstore_threads(<found>): Threads::Threads, made when it is not there.
function(_polstore_threads found)
	if(NOT TARGET Threads::Threads)
		set(THREADS_PREFER_PTHREAD_FLAG ON)
		find_package(Threads QUIET)
	endif()
	if(TARGET Threads::Threads)
		set(${found} TRUE PARENT_SCOPE)
	else()
		set(${found} FALSE PARENT_SCOPE)
	endif()
endfunction()
