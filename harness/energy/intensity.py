"""Grid carbon intensity (g CO2eq/kWh) of a configured country/region, from codecarbon's bundled data.

The country is configuration, not detection: an ISO 3166 alpha-3 code (``USA``,
``FRA``, ``DEU``; optional region for USA/CAN, e.g. ``california``) given per call,
else ``$VNR_COUNTRY_ISO_CODE`` / ``$VNR_REGION``, else :data:`DEFAULT_COUNTRY`.
No location look-up and no Electricity Maps request is ever made.

Also here: :func:`scope_slurm_array_task`, which prepares the environment that
codecarbon reads when it is imported (every codecarbon import goes through this
module or :mod:`harness.energy.tracker`, which calls it first).
"""

from __future__ import annotations

import os
from typing import Any

from ranking.floor.errors import UserError

DEFAULT_COUNTRY = "USA"
COUNTRY_ENV = "VNR_COUNTRY_ISO_CODE"
REGION_ENV = "VNR_REGION"


def scope_slurm_array_task() -> None:
    """In a SLURM array task, point ``SLURM_JOB_ID`` at this task (``<array job>_<task>``).

    codecarbon reads ``SLURM_JOB_ID`` when it is imported to ask ``scontrol`` for the
    job's CPUs; for an array task the array's own id would describe the whole array.
    The one reader of the SLURM environment does it:
    :func:`harness.environment.pin_array_task_job_id`.
    """
    from harness.environment import pin_array_task_job_id

    pin_array_task_job_id()


def resolve_location(country_iso_code: str | None = None, region: str | None = None) -> tuple[str, str | None]:
    """(country, region): the arguments, else ``$VNR_COUNTRY_ISO_CODE`` / ``$VNR_REGION``, else USA.

    >>> resolve_location(" fra ", "Ile-de-France")
    ('FRA', 'ile-de-france')
    """
    country = (country_iso_code or os.environ.get(COUNTRY_ENV) or DEFAULT_COUNTRY).strip().upper()
    region = region or os.environ.get(REGION_ENV) or None
    return country, (region.strip().lower() if region else None)


def check_location(country_iso_code: str | None = None, region: str | None = None) -> tuple[str, str | None]:
    """The resolved (country, region) if codecarbon's bundled data know them, else a one-line :class:`UserError`.

    An unknown region is refused rather than left to codecarbon, which would fall back on the
    country's average without a word; regions exist for USA and CAN only.

    >>> check_location("usa", "California")
    ('USA', 'california')
    >>> check_location("FRA", "bretagne")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: region 'bretagne' for the carbon intensity: codecarbon has regions for USA and CAN only; leave --region out for FRA
    """
    country, region = resolve_location(country_iso_code, region)
    scope_slurm_array_task()
    from codecarbon.input import DataSource, DataSourceException

    source = DataSource()
    if country not in source.get_global_energy_mix_data():
        raise UserError(
            f"unknown country ISO code {country!r} for the carbon intensity: use an ISO 3166 alpha-3 code "
            f"such as USA, FRA, DEU, GBR (option --country or {COUNTRY_ENV})"
        )
    if region is None:
        return country, None
    if country not in ("USA", "CAN"):
        raise UserError(f"region {region!r} for the carbon intensity: codecarbon has regions for USA and CAN only; "
                        f"leave --region out for {country}")
    try:  # USA: regional emissions; CAN: regional energy mixes
        data = source.get_country_emissions_data(country.lower())
    except DataSourceException:
        data = source.get_country_energy_mix_data(country.lower())
    regions = [r for r in data if not r.startswith("_")]
    if region not in regions:
        raise UserError(f"unknown region {region!r} of {country} for the carbon intensity (known: "
                        f"{', '.join(sorted(regions)[:8])}, ...; option --region or {REGION_ENV})")
    return country, region


def grid_intensity(country_iso_code: str | None = None, region: str | None = None) -> dict[str, Any]:
    """Grid carbon intensity (g CO2eq/kWh) from codecarbon's bundled data, offline.

    >>> round(grid_intensity("FRA")["g_per_kwh"]) < round(grid_intensity("POL")["g_per_kwh"])
    True
    """
    country, region = check_location(country_iso_code, region)
    from codecarbon.core.emissions import Emissions
    from codecarbon.core.units import Energy
    from codecarbon.external.geography import GeoMetadata
    from codecarbon.input import DataSource

    source = DataSource()
    mix = source.get_global_energy_mix_data()
    geo = GeoMetadata(country_iso_code=country, country_name=mix[country].get("country_name"), region=region)
    # electricitymaps_api_token=None: never ask the Electricity Maps API, even if a config file names a token.
    emissions = Emissions(source, electricitymaps_api_token=None)
    kg = emissions.get_private_infra_emissions(Energy.from_energy(kWh=1.0), geo)
    where = f"{country}/{region}" if region else country
    return {
        "g_per_kwh": float(kg) * 1000.0,
        "country_iso_code": country,
        "country_name": geo.country_name,
        "region": region,
        "source": f"codecarbon {codecarbon_version()} bundled energy-mix data ({where})",
    }


def codecarbon_version() -> str:
    """The installed codecarbon's version ('?' if it cannot be read)."""
    try:
        from codecarbon import __version__

        return str(__version__)
    except Exception:  # pragma: no cover
        return "?"
