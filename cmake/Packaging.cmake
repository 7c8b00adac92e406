# The Debian package, made by scripts/package.sh (docs/deployment.md): CPack's DEB generator
# over this project's install() rules, so the package holds exactly what `cmake --install`
# installs with the prefix /usr (one source of truth for the layout), plus the Debian-only
# files below (maintainer scripts, conffiles, changelog, copyright). lintian needs no override.
# Only a /usr build can be packaged: the unit's ExecStart= and the /etc and /lib paths are
# fixed when CMake configures, so a /usr/local build would make a package with wrong paths.
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  return()
endif()

set(ibfabric_deb_name ibfabricd)
set(ibfabric_deb_src ${PROJECT_SOURCE_DIR}/deploy/debian)
set(ibfabric_deb_out ${PROJECT_BINARY_DIR}/debian)

# The maintainer scripts get their paths from the same variables as the install() rules.
set(IBFABRIC_DEB_SYSCONFDIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/ibfabric)
# IBFABRIC_SYSUSERS_FILE comes from systemd/CMakeLists.txt.
foreach(script postinst prerm postrm conffiles)
  configure_file(${ibfabric_deb_src}/${script}.in ${ibfabric_deb_out}/${script} @ONLY
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                  WORLD_READ WORLD_EXECUTE)
endforeach()
file(CHMOD ${ibfabric_deb_out}/conffiles PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# The changelog's newest entry must be this version: dpkg and lintian read it.
file(STRINGS ${ibfabric_deb_src}/changelog ibfabric_changelog_head LIMIT_COUNT 1)
if(NOT ibfabric_changelog_head MATCHES "^${ibfabric_deb_name} \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "deploy/debian/changelog starts with '${ibfabric_changelog_head}', "
                      "not version ${PROJECT_VERSION}: add an entry for it")
endif()
add_custom_command(OUTPUT ${ibfabric_deb_out}/changelog.gz
  COMMAND gzip -9n -c ${ibfabric_deb_src}/changelog > ${ibfabric_deb_out}/changelog.gz
  DEPENDS ${ibfabric_deb_src}/changelog VERBATIM)
add_custom_target(ibfabric_deb_changelog ALL DEPENDS ${ibfabric_deb_out}/changelog.gz)
install(FILES ${ibfabric_deb_out}/changelog.gz ${ibfabric_deb_src}/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ${ibfabric_deb_name})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "ibfabric")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "InfiniBand fabric monitor (Prometheus exporter)")
# The extended description; CPack indents it and writes the empty line as " .".
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "ibfabricd is a daemon, one per node, that reads the node's InfiniBand HCA
ports from sysfs and the fabric through MAD queries (port counters, link
state, Subnet Manager state, SR-IOV virtual functions, active probes), and
exposes them on a Prometheus endpoint. It runs unprivileged under systemd.

The package also ships Prometheus alert rules and Grafana dashboards under
/usr/share/ibfabric.")
set(IBFABRIC_DEB_MAINTAINER "ibfabric maintainers <maintainers@ibfabric.invalid>" CACHE STRING
    "Maintainer field of the Debian package (Name <email>)")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${IBFABRIC_DEB_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/ibfabric/ibfabric")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# ib_umad (loaded by rdma-core) and udev (the umad rule) are needed on a real node, but the
# package installs and its --check-config works without them (containers, CI).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "rdma-core, udev")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus, grafana")
# Runtime libraries from dpkg-shlibdeps (the -dev packages are build dependencies only), plus
# what the maintainer scripts call: systemd-sysusers (systemd, or the standalone one in
# containers) and deb-systemd-helper/deb-systemd-invoke.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd | systemd-standalone-sysusers, init-system-helpers (>= 1.52)")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # ibfabricd_<version>_<arch>.deb (no Debian revision)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${ibfabric_deb_out}/postinst ${ibfabric_deb_out}/prerm ${ibfabric_deb_out}/postrm
    ${ibfabric_deb_out}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Absolute destinations (/etc, /lib) go below the staging dir, never onto this machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package-out)
include(CPack)
